//! An example webhook receiver: verifies hookline's signatures, de-duplicates on
//! `webhook-id` in Redis or PostgreSQL, and prints each processed event once
//! (`processed <id> <body>`).
//!
//! ```sh
//! HOOKLINE_RECEIVER_SECRETS='whsec_...,whpk_...' \
//!   cargo run -p hookline-receiver --example receiver -- \
//!   --listen 127.0.0.1:8088 --redis-url redis://127.0.0.1:6379
//! # or, instead of Redis:
//! HOOKLINE_RECEIVER_POSTGRES_URL='postgres://user:pw@127.0.0.1:5432/app' ...
//! ```
//!
//! Webhooks are accepted on every path (`POST`).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use clap::Parser;
use hookline_core::secret::Secret;
use hookline_receiver::{
    OnStoreError, PgStore, PgStoreSettings, ReceiverConfig, ReceiverSettings, RedisStore,
    RedisStoreSettings, Verified, WebhookLayer,
};

#[derive(Parser)]
#[command(about = "An example receiver of hookline's webhooks")]
struct Args {
    /// Address to listen on (port 0 picks a free one; the address is printed).
    #[arg(long, default_value = "127.0.0.1:8088")]
    listen: String,
    /// `whsec_` secrets and `whpk_` public keys, comma-separated (`${env:..}`, `${file:..}`
    /// references allowed).
    #[arg(long, env = "HOOKLINE_RECEIVER_SECRETS", hide_env_values = true)]
    secrets: Option<String>,
    /// A file of secrets and public keys, one a line (besides `--secrets`).
    #[arg(long)]
    secrets_file: Option<PathBuf>,
    /// The Redis that remembers webhook ids.
    #[arg(
        long,
        env = "HOOKLINE_RECEIVER_REDIS_URL",
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6379"
    )]
    redis_url: String,
    /// Prefix of the Redis keys.
    #[arg(long, default_value = "hookline:receiver:")]
    key_prefix: String,
    /// Remember webhook ids in this PostgreSQL instead of Redis (table `hookline_received`,
    /// made when missing).
    #[arg(long, env = "HOOKLINE_RECEIVER_POSTGRES_URL", hide_env_values = true)]
    postgres_url: Option<String>,
    /// The schema of the PostgreSQL tables.
    #[arg(long, default_value = "public")]
    postgres_schema: String,
    /// This receiver's name in the PostgreSQL table (receivers sharing it are kept apart).
    #[arg(long, default_value = "default")]
    receiver_name: String,
    /// Timestamp tolerance, seconds.
    #[arg(long, default_value_t = 300)]
    tolerance_s: u64,
    /// How long a webhook id is remembered, seconds; at least twice the tolerance (unset: a
    /// day, or twice the tolerance if that is longer).
    #[arg(long)]
    dedup_ttl_s: Option<u64>,
    /// How long a claim holds an id while its handler runs, seconds.
    #[arg(long, default_value_t = 60)]
    processing_lease_s: u64,
    /// Process webhooks when the store is unavailable instead of answering 503.
    #[arg(long)]
    fail_open: bool,
}

fn secrets(args: &Args) -> anyhow::Result<Vec<Secret>> {
    let mut entries: Vec<String> = Vec::new();
    if let Some(list) = &args.secrets {
        entries.extend(list.split(',').map(str::to_owned));
    }
    if let Some(path) = &args.secrets_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading --secrets-file {}", path.display()))?;
        entries.extend(text.lines().map(str::to_owned));
    }
    let entries: Vec<&str> = entries
        .iter()
        .map(|e| e.trim())
        .filter(|e| !e.is_empty())
        .collect();
    if entries.is_empty() {
        bail!("no secrets: set HOOKLINE_RECEIVER_SECRETS or --secrets-file");
    }
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| Secret::resolve(e).with_context(|| format!("secrets[{i}]")))
        .collect()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let mut config = ReceiverConfig::with_secrets(secrets(&args)?);
    config.tolerance_s = args.tolerance_s;
    config.dedup_ttl_s = args.dedup_ttl_s;
    config.processing_lease_s = args.processing_lease_s;
    if args.fail_open {
        config.on_store_error = OnStoreError::Process;
    }
    let settings = config.into_settings()?;
    let app = match &args.postgres_url {
        Some(url) => {
            let mut pg = PgStoreSettings::new(Secret::resolve(url).context("--postgres-url")?);
            pg.schema = args.postgres_schema.clone();
            pg.receiver = args.receiver_name.clone();
            let redacted = pg.redacted_url();
            let store = PgStore::connect(pg)
                .await
                .with_context(|| format!("connecting to PostgreSQL at {redacted}"))?;
            app(settings, store)
        }
        None => {
            let mut redis = RedisStoreSettings::new(Secret::new(args.redis_url.clone()));
            redis.key_prefix = args.key_prefix.clone();
            let redacted = redis.redacted_url();
            let store = RedisStore::connect(redis)
                .await
                .with_context(|| format!("connecting to Redis at {redacted}"))?;
            app(settings, store)
        }
    };
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding --listen {}", args.listen))?;
    println!("listening on {}", listener.local_addr()?);
    std::io::stdout().flush()?;
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

fn app(settings: ReceiverSettings, store: impl hookline_receiver::DedupStore) -> Router {
    Router::new()
        .fallback(post(process))
        .layer(WebhookLayer::new(settings, store))
}

/// The application's handler: here, print the event.
async fn process(verified: Verified, body: Bytes) -> &'static str {
    let mut out = std::io::stdout().lock();
    // A closed stdout is no reason to fail the webhook.
    let _ = writeln!(
        out,
        "processed {} {}",
        verified.id,
        String::from_utf8_lossy(&body)
    );
    let _ = out.flush();
    "ok"
}
