//! Reading the cancellations topic: to its end before deliveries start, then followed, with
//! what is older than the memory bound forgotten once a minute.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hookline_kafka::KafkaSettings;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

use super::set::CancellationSet;
use crate::delivery::now_ms;
use crate::endpoints::partitions_of;
use crate::error::{DispatchError, Result};

/// How often cancellations past the bound are forgotten.
const FORGET_EVERY: Duration = Duration::from_secs(60);

/// Reads `topic` to its current end into `set`, then keeps following it in a background
/// task until `shutdown`. A topic that does not exist stops start-up.
pub(crate) async fn follow(
    kafka: &KafkaSettings,
    topic: &str,
    set: Arc<CancellationSet>,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>> {
    let mut config = kafka.client_config();
    config
        .set("group.id", "hookline-cancellations-reader")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false");
    let consumer: StreamConsumer = config
        .create()
        .map_err(|source| DispatchError::kafka("creating the cancellations reader", source))?;
    let consumer = Arc::new(consumer);

    // Metadata and watermarks are blocking calls: keep them off the async workers.
    let reader = Arc::clone(&consumer);
    let topic_name = topic.to_owned();
    let ends = tokio::task::spawn_blocking(move || -> Result<BTreeMap<i32, i64>> {
        let timeout = Duration::from_secs(10);
        let assign_failed =
            |source| DispatchError::kafka("assigning the cancellations topic", source);
        let mut assignment = TopicPartitionList::new();
        let mut ends = BTreeMap::new();
        for partition in partitions_of(&*reader, &topic_name, timeout)? {
            assignment
                .add_partition_offset(&topic_name, partition, Offset::Beginning)
                .map_err(assign_failed)?;
            let (_, high) = reader
                .fetch_watermarks(&topic_name, partition, timeout)
                .map_err(|source| {
                    DispatchError::kafka("reading the cancellations topic's end", source)
                })?;
            ends.insert(partition, high);
        }
        reader.assign(&assignment).map_err(assign_failed)?;
        Ok(ends)
    })
    .await
    .map_err(|error| {
        DispatchError::Internal(format!("cancellations reader panicked: {error}"))
    })??;

    // Catch up: every partition read up to the end it had when we started.
    let mut behind: BTreeMap<i32, i64> = ends.into_iter().filter(|(_, high)| *high > 0).collect();
    while !behind.is_empty() {
        let message = tokio::select! {
            () = shutdown.cancelled() => return Err(DispatchError::ShutdownDuringStartup),
            message = tokio::time::timeout(Duration::from_secs(30), consumer.recv()) => message,
        };
        let message = message
            .map_err(|_| DispatchError::Internal(format!("reading {topic} timed out")))?
            .map_err(|source| DispatchError::kafka("reading the cancellations topic", source))?;
        set.apply(message.key(), message.payload(), now_ms());
        if behind
            .get(&message.partition())
            .is_some_and(|high| message.offset() + 1 >= *high)
        {
            behind.remove(&message.partition());
        }
    }
    tracing::info!(topic, cancellations = set.len(), "cancellations loaded");

    let topic = topic.to_owned();
    Ok(tokio::spawn(async move {
        let mut forget = tokio::time::interval(FORGET_EVERY);
        forget.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = forget.tick() => {
                    let forgotten = set.forget_old(now_ms());
                    if forgotten > 0 {
                        tracing::info!(forgotten, held = set.len(), "old cancellations forgotten");
                    }
                }
                message = consumer.recv() => match message {
                    Ok(message) => {
                        let applied = set.apply(message.key(), message.payload(), now_ms());
                        tracing::info!(?applied, "cancellations record read");
                    }
                    Err(error) => {
                        tracing::warn!(%error, topic, "reading the cancellations topic failed");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                },
            }
        }
    }))
}
