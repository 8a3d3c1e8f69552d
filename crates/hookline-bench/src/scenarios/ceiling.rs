//! Scenario 1, the ceiling: a plain reqwest client POSTing the same number of requests
//! with the same concurrency to the same sink, no Kafka: the HTTP limit of the machine.
//! It runs as its own process (`hookline-bench ceiling`), so its CPU and memory are its own.

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use reqwest::header::CONTENT_TYPE;
use tokio::process::Command;

use super::ScenarioCtx;
use crate::contest::{self, Measured};
use crate::fixture::payload;
use crate::sink::{PUBLISHED_HEADER, now_us};

/// Options of `hookline-bench ceiling`.
#[derive(Debug, clap::Args)]
pub struct CeilingArgs {
    /// Where to POST.
    #[arg(long)]
    url: String,
    /// Requests to make, with ids `<prefix><n>`.
    #[arg(long)]
    requests: u64,
    /// The prefix of the `webhook-id`s.
    #[arg(long)]
    prefix: String,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Body size, bytes.
    #[arg(long, default_value_t = 256)]
    payload_bytes: usize,
}

/// Makes the requests, then waits for SIGTERM (so that it is measured like the others).
/// SIGTERM is listened for from the start: the benchmark sends it once the sink has every
/// request, which can be before the last response reached this process; a SIGTERM then,
/// with no listener yet, killed it, and the run failed.
pub async fn run(args: CeilingArgs) -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listening for SIGTERM")?;
    tokio::select! {
        posted = post_all(&args) => posted?,
        _ = term.recv() => return Ok(()),
    }
    term.recv().await;
    Ok(())
}

/// Makes the `requests`, `concurrency` at a time; fails on the first error or non-2xx.
async fn post_all(args: &CeilingArgs) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("creating the HTTP client")?;
    // `Bytes` clones share the buffer.
    let body = axum::body::Bytes::from(payload(args.payload_bytes));
    let mut results = futures::stream::iter(0..args.requests)
        .map(|n| {
            client
                .post(&args.url)
                .header("webhook-id", format!("{}{n:07}", args.prefix))
                .header(PUBLISHED_HEADER, now_us().to_string())
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone())
                .send()
        })
        .buffer_unordered(args.concurrency.max(1));
    while let Some(result) = results.next().await {
        let response = result.context("posting")?;
        if !response.status().is_success() {
            bail!("HTTP {}", response.status());
        }
    }
    Ok(())
}

/// Runs the ceiling once: `events` requests.
pub async fn measure(ctx: &ScenarioCtx<'_>, round: u32) -> anyhow::Result<Measured> {
    let prefix = format!("{}-ceiling-r{round}-", ctx.base);
    let mut command = Command::new(std::env::current_exe().context("this benchmark's own path")?);
    command
        .arg("ceiling")
        .args(["--url", &ctx.sink.url()])
        .args(["--requests", &ctx.sizes.events.to_string()])
        .args(["--prefix", &prefix])
        .args(["--concurrency", &ctx.sizes.concurrency.to_string()])
        .args(["--payload-bytes", &ctx.sizes.payload_bytes.to_string()]);
    contest::drain(
        ctx,
        &format!("ceiling-{round}"),
        command,
        ctx.sizes.events,
        &prefix,
        None,
    )
    .await
}
