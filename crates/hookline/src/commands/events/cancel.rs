//! `hookline events cancel`: writes a cancellation (or, with `--undo`, its tombstone) to the
//! compacted cancellations topic, keyed `EVENT_ID` or `EVENT_ID/ENDPOINT_ID`. Every
//! dispatcher follows that topic and checks it before each attempt.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use hookline_core::cancellation::{Cancellation, cancellation_key};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};

use crate::commands::Context;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Arguments of `hookline events cancel`.
#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    /// The event to cancel (its `event_id`, the `webhook-id` receivers see).
    event_id: String,
    /// Cancel only its delivery to this endpoint; default: every delivery of the event (all
    /// the endpoints a tenant event was fanned out to).
    #[arg(long)]
    endpoint: Option<String>,
    /// Why, in your words; shown in the DLQ record of each parked delivery.
    #[arg(long, conflicts_with = "undo")]
    reason: Option<String>,
    /// Who cancels; default the USER environment variable.
    #[arg(long, env = "USER", conflicts_with = "undo")]
    by: Option<String>,
    /// Withdraw the cancellation instead (a tombstone): attempts made after the dispatchers
    /// see it go ahead; what was parked meanwhile stays parked (redrive it).
    #[arg(long)]
    undo: bool,
    /// The cancellations topic; default `<events topic>.cancellations`.
    #[arg(long, value_name = "TOPIC")]
    topic: Option<String>,
}

/// Runs `hookline events cancel`.
pub async fn run(args: CancelArgs, context: &Context) -> anyhow::Result<()> {
    let topic = args
        .topic
        .clone()
        .unwrap_or_else(|| context.topics.cancellations());
    let cancellation = Cancellation {
        event_id: args.event_id.clone(),
        endpoint_id: args.endpoint.clone(),
        reason: args.reason.clone(),
        cancelled_at_ms: now_ms(),
        cancelled_by: args.by.clone().filter(|by| !by.is_empty()),
    };
    cancellation.validate().context("the cancellation")?;
    let key = cancellation_key(&args.event_id, args.endpoint.as_deref());
    check_topic(context, &topic).await?;
    let producer: FutureProducer = context
        .kafka
        .producer_config()
        .create()
        .context("creating the Kafka producer")?;
    let value = (!args.undo).then(|| cancellation.to_json());
    let mut record = FutureRecord::<str, [u8]>::to(&topic).key(&key);
    if let Some(value) = &value {
        record = record.payload(value);
    }
    let delivery = producer
        .send(record, TIMEOUT)
        .await
        .map_err(|(error, _)| error)
        .with_context(|| format!("writing to {topic}"))?;
    let scope = match &args.endpoint {
        Some(endpoint) => format!("delivery to {endpoint}"),
        None => "every delivery".to_owned(),
    };
    let verb = if args.undo {
        "uncancelled"
    } else {
        "cancelled"
    };
    println!(
        "{verb} {} ({scope}) key={key} topic={topic} partition={} offset={}",
        args.event_id, delivery.partition, delivery.offset
    );
    Ok(())
}

/// Refuses to write to a topic that does not exist (the broker might create it, without
/// compaction).
async fn check_topic(context: &Context, topic: &str) -> anyhow::Result<()> {
    let consumer: BaseConsumer = context
        .kafka
        .client_config()
        .create()
        .context("creating a metadata client")?;
    let name = topic.to_owned();
    let exists = tokio::task::spawn_blocking(move || -> anyhow::Result<bool> {
        let metadata = consumer
            .fetch_metadata(Some(&name), Duration::from_secs(10))
            .context("reading the topic's metadata")?;
        Ok(metadata
            .topics()
            .iter()
            .any(|t| t.name() == name && t.error().is_none() && !t.partitions().is_empty()))
    })
    .await
    .context("the metadata check stopped")??;
    if !exists {
        bail!("topic {topic} does not exist (create it with `hookline topics create`)");
    }
    Ok(())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
