//! The baseline: the simplest correct at-least-once Kafka-to-HTTP forwarder written with the
//! same crates as hookline. One group consumer; each record's event is POSTed to one URL,
//! at most `concurrency` at once; offsets are stored in the order the records were read,
//! each only after its POST (and every earlier one) returned 2xx; the event's headers are
//! sent with it. No signing, no retries, no DLQ: a failed POST stops the process without
//! storing its offset.

use anyhow::{Context as _, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use hookline_core::WebhookEvent;
use hookline_kafka::KafkaSettings;
use rdkafka::consumer::{CommitMode, Consumer as _, StreamConsumer};
use rdkafka::error::KafkaResult;
use rdkafka::message::{BorrowedMessage, Message as _};
use reqwest::header::CONTENT_TYPE;

/// Options of `hookline-bench baseline`.
#[derive(Debug, clap::Args)]
pub struct BaselineArgs {
    /// Kafka brokers.
    #[arg(long)]
    bootstrap_servers: String,
    /// The events topic.
    #[arg(long)]
    topic: String,
    /// The consumer group.
    #[arg(long)]
    group_id: String,
    /// Where every event is POSTed.
    #[arg(long)]
    url: String,
    /// POSTs in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

/// Forwards until SIGTERM or SIGINT, then commits the offsets stored so far.
pub async fn run(args: BaselineArgs) -> anyhow::Result<()> {
    let consumer: StreamConsumer = KafkaSettings::new(&args.bootstrap_servers)
        .consumer_config(&args.group_id)
        .create()
        .context("creating the consumer")?;
    consumer
        .subscribe(&[&args.topic])
        .with_context(|| format!("subscribing to {}", args.topic))?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("creating the HTTP client")?;

    // `buffered` yields results in the order the records were read, so a stored offset
    // never passes a record whose POST has not returned yet.
    let forward_all = consumer
        .stream()
        .map(|message| forward(&client, &args.url, message))
        .buffered(args.concurrency.max(1))
        .try_for_each(|message| {
            let stored = consumer
                .store_offset_from_message(&message)
                .context("storing an offset");
            async move { stored }
        });
    tokio::select! {
        result = forward_all => result?,
        signal = terminated() => signal?,
    }
    if let Err(error) = consumer.commit_consumer_state(CommitMode::Sync) {
        tracing::warn!(%error, "committing the stored offsets");
    }
    Ok(())
}

async fn forward<'a>(
    client: &reqwest::Client,
    url: &str,
    message: KafkaResult<BorrowedMessage<'a>>,
) -> anyhow::Result<BorrowedMessage<'a>> {
    let message = message.context("receiving from Kafka")?;
    let event =
        WebhookEvent::from_json(message.payload().unwrap_or_default()).with_context(|| {
            format!(
                "decoding the event at {}/{}",
                message.partition(),
                message.offset()
            )
        })?;
    let mut request = client.post(url);
    // The event's own headers, as hookline sends them (the benchmark's publish time).
    for (name, value) in &event.headers {
        request = request.header(name, value);
    }
    let response = request
        .header("webhook-id", &event.event_id)
        .header(CONTENT_TYPE, &event.content_type)
        .body(event.payload)
        .send()
        .await
        .with_context(|| format!("posting event {}", event.event_id))?;
    if !response.status().is_success() {
        bail!("event {}: HTTP {}", event.event_id, response.status());
    }
    Ok(message)
}

async fn terminated() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}
