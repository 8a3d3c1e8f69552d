//! `hookline outbox run`: the relay, with /metrics and /healthz on an admin port, until
//! SIGTERM or SIGINT.

use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use clap::ValueEnum;
use hookline_producer::outbox::{OutboxConfig, Relay};
use hookline_producer::{Encoding, Publisher, PublisherConfig};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::commands::Context;

/// Options of `hookline outbox run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Encoding of the record value, as `hookline publish`'s.
    #[arg(long, value_enum, default_value_t = EncodingArg::Avro)]
    encoding: EncodingArg,
    /// Where the admin port (/healthz, /metrics) listens, e.g. `127.0.0.1:9464`.
    #[arg(long, value_name = "ADDR")]
    admin_listen: Option<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum EncodingArg {
    /// Avro through the schema registry.
    Avro,
    /// JSON, without a registry.
    Json,
}

/// Runs the relay until a signal asks it to stop; the batch in flight is finished.
pub async fn run(args: RunArgs, config: OutboxConfig, context: &Context) -> anyhow::Result<()> {
    let settings = config
        .into_settings()
        .context("invalid outbox configuration")?;
    let encoding = match args.encoding {
        EncodingArg::Avro => Encoding::Avro,
        EncodingArg::Json => Encoding::Json,
    };
    let registry = match encoding {
        Encoding::Avro => Some(context.registry()?),
        Encoding::Json => None,
    };
    let publisher = Publisher::new(
        &context.kafka,
        registry,
        PublisherConfig::new(&context.topics.events, encoding),
    )
    .context("creating the publisher")?;
    let relay = Relay::new(settings, Arc::new(publisher)).context("creating the relay")?;
    let shutdown = CancellationToken::new();
    let admin = match args.admin_listen.filter(|listen| !listen.is_empty()) {
        Some(listen) => Some(serve_admin(&listen, &relay, shutdown.clone()).await?),
        None => None,
    };
    let signal = super::super::dispatch::wait_for_signal();
    tokio::pin!(signal);
    let running = relay.run(shutdown.clone());
    tokio::pin!(running);
    tokio::select! {
        () = &mut running => {}
        signal = &mut signal => {
            signal?;
            tracing::info!("stop requested: finishing the batch in flight");
            shutdown.cancel();
            running.await;
        }
    }
    shutdown.cancel();
    if let Some(admin) = admin {
        admin.await.context("the admin port")?;
    }
    Ok(())
}

async fn serve_admin(
    listen: &str,
    relay: &Relay,
    shutdown: CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut registry = Registry::default();
    relay.metrics().register(&mut registry);
    let registry = Arc::new(registry);
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/metrics",
            get(move || {
                let registry = registry.clone();
                async move {
                    let mut text = String::new();
                    match prometheus_client::encoding::text::encode(&mut text, &registry) {
                        Ok(()) => (
                            [(
                                CONTENT_TYPE,
                                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                            )],
                            text,
                        ),
                        Err(_) => ([(CONTENT_TYPE, "text/plain")], String::new()),
                    }
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("--admin-listen {listen}"))?;
    let addr = listener.local_addr().context("the admin port's address")?;
    tracing::info!(%addr, "admin port: /healthz /metrics");
    // Tests and scripts find the port here when it was chosen by the system (port 0).
    eprintln!("hookline outbox: admin port listening on {addr}");
    Ok(tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(error) = served {
            tracing::warn!(%error, "the admin port stopped");
        }
    }))
}
