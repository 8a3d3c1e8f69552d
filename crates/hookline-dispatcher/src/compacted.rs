//! Following a compacted topic that every replica reads whole (the endpoints, the
//! cancellations): each partition is read from its beginning to the end it had at start
//! before deliveries start, then followed in a background task.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hookline_kafka::KafkaSettings;
use rdkafka::consumer::{Consumer, ConsumerContext, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::{DispatchError, Result};

/// How often a follower's [`Records::housekeep`] runs.
const HOUSEKEEPING: Duration = Duration::from_secs(60);
/// Longest wait for the next record while catching up.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(30);

/// What a follower does with the records of its topic.
pub(crate) trait Records: Send + Sync + 'static {
    /// What the topic holds, in logs and errors ("endpoints", "cancellations").
    const WHAT: &'static str;
    /// Applies one record (a `None` value is a tombstone).
    fn apply(&self, partition: i32, offset: i64, key: Option<&[u8]>, value: Option<&[u8]>);
    /// How many entries are held now (logged once the topic is loaded).
    fn held(&self) -> usize;
    /// Runs every minute while following (nothing by default).
    fn housekeep(&self) {}
}

/// Reads `topic` to its current end into `records`, then keeps following it in a
/// background task of `tracker` until `shutdown`. A topic that does not exist stops
/// start-up.
pub(crate) async fn follow<R: Records>(
    kafka: &KafkaSettings,
    topic: &str,
    records: Arc<R>,
    tracker: &TaskTracker,
    shutdown: CancellationToken,
) -> Result<()> {
    let what = R::WHAT;
    let mut config = kafka.client_config();
    config
        .set("group.id", format!("hookline-{what}-reader"))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false");
    let consumer: StreamConsumer = config
        .create()
        .map_err(|source| DispatchError::kafka(&format!("creating the {what} reader"), source))?;
    let consumer = Arc::new(consumer);

    // Metadata and watermarks are blocking calls: keep them off the async workers.
    let reader = Arc::clone(&consumer);
    let topic_name = topic.to_owned();
    let ends = tokio::task::spawn_blocking(move || -> Result<BTreeMap<i32, i64>> {
        let timeout = Duration::from_secs(10);
        let assign_failed =
            |source| DispatchError::kafka(&format!("assigning the {what} topic"), source);
        let mut assignment = TopicPartitionList::new();
        let mut ends = BTreeMap::new();
        for partition in partitions_of(&*reader, &topic_name, timeout)? {
            assignment
                .add_partition_offset(&topic_name, partition, Offset::Beginning)
                .map_err(assign_failed)?;
            let (_, high) = reader
                .fetch_watermarks(&topic_name, partition, timeout)
                .map_err(|source| {
                    DispatchError::kafka(&format!("reading the {what} topic's end"), source)
                })?;
            ends.insert(partition, high);
        }
        reader.assign(&assignment).map_err(assign_failed)?;
        Ok(ends)
    })
    .await
    .map_err(|error| DispatchError::Internal(format!("the {what} reader panicked: {error}")))??;

    // Catch up: every partition read up to the end it had when we started.
    let mut behind: BTreeMap<i32, i64> = ends.into_iter().filter(|(_, high)| *high > 0).collect();
    while !behind.is_empty() {
        let message = tokio::select! {
            () = shutdown.cancelled() => return Err(DispatchError::ShutdownDuringStartup),
            message = tokio::time::timeout(CATCH_UP_TIMEOUT, consumer.recv()) => message,
        };
        let message = message
            .map_err(|_| DispatchError::Internal(format!("reading {topic} timed out")))?
            .map_err(|source| DispatchError::kafka(&format!("reading the {what} topic"), source))?;
        let (partition, offset) = (message.partition(), message.offset());
        records.apply(partition, offset, message.key(), message.payload());
        if behind
            .get(&partition)
            .is_some_and(|high| offset + 1 >= *high)
        {
            behind.remove(&partition);
        }
    }
    tracing::info!(topic, what, held = records.held(), "topic loaded");

    let topic = topic.to_owned();
    tracker.spawn(async move {
        let mut housekeeping = tokio::time::interval(HOUSEKEEPING);
        housekeeping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = housekeeping.tick() => records.housekeep(),
                message = consumer.recv() => match message {
                    Ok(message) => records.apply(
                        message.partition(),
                        message.offset(),
                        message.key(),
                        message.payload(),
                    ),
                    Err(error) => {
                        tracing::warn!(%error, topic, what, "reading a followed topic failed");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                },
            }
        }
    });
    Ok(())
}

/// The partitions of `topic` (a blocking call); a topic without any does not exist.
pub(crate) fn partitions_of<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    topic: &str,
    timeout: Duration,
) -> Result<Vec<i32>> {
    let metadata = consumer
        .fetch_metadata(Some(topic), timeout)
        .map_err(|source| DispatchError::kafka("reading a topic's metadata", source))?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Err(DispatchError::MissingTopic(topic.to_owned()));
    }
    Ok(partitions)
}
