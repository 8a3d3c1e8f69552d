//! Finding one event's attempt-log records: the partition its id hashes to (murmur2, as the
//! writer's partitioner), from a time (default: all the topic keeps) to the high watermark
//! seen at the start; records of other events are skipped by key, before any decoding.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use hookline_core::attempt_log::{AttemptRecord, partition_for};
use hookline_kafka::{KafkaSettings, Registry};
use rdkafka::message::Message;

use super::story::Story;
use crate::error::{DlqError, Result};
use crate::reader::{Start, TopicReader};

/// Records are written a little after their timestamps; seeking by time starts this much
/// earlier so that clock skew between hosts loses nothing.
const TIME_SEEK_MARGIN_MS: i64 = 5 * 60_000;

/// How to look an event up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookupOptions {
    /// The attempt-log topic.
    pub topic: String,
    /// Read only records from this time on, epoch milliseconds (`None`: all that is kept).
    pub since_ms: Option<i64>,
    /// How long the partition may yield nothing before its high watermark is reached.
    pub idle_timeout: Duration,
}

impl LookupOptions {
    /// All that `topic` keeps.
    pub fn new(topic: impl Into<String>) -> Self {
        LookupOptions {
            topic: topic.into(),
            since_ms: None,
            idle_timeout: Duration::from_secs(30),
        }
    }
}

/// What a lookup found, and what it read to find it.
#[derive(Clone, Debug)]
pub struct Lookup {
    /// The event's story.
    pub story: Story,
    /// The topic read.
    pub topic: String,
    /// The one partition read.
    pub partition: i32,
    /// The topic's partition count.
    pub partitions: i32,
    /// Records read from the partition (all events').
    pub records_scanned: u64,
    /// Records with the event's key that could not be decoded (left out of the story).
    pub undecodable: u64,
}

impl Lookup {
    /// The story as JSON with what was read: `event_id`, `steps`... (see
    /// [`Story::to_json`]), then `topic`, `partition`, `records_scanned`, `undecodable`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut json = self.story.to_json();
        if let Some(object) = json.as_object_mut() {
            object.insert("topic".into(), self.topic.clone().into());
            object.insert("partition".into(), self.partition.into());
            object.insert("records_scanned".into(), self.records_scanned.into());
            object.insert("undecodable".into(), self.undecodable.into());
        }
        json
    }
}

/// Reads the story of `event_id`: the one partition of `options.topic` its id hashes to,
/// decoded through `registry`. Fails with [`DlqError::TopicNotFound`] when the topic does
/// not exist, and on a registry that cannot be reached; an event without records is an
/// empty story.
pub async fn lookup(
    kafka: &KafkaSettings,
    registry: &Arc<Registry>,
    event_id: &str,
    options: &LookupOptions,
) -> Result<Lookup> {
    let key = event_id.as_bytes().to_vec();
    let chosen = Arc::new(AtomicI32::new(-1));
    let count = Arc::new(AtomicI32::new(0));
    let (chosen_in, count_in) = (Arc::clone(&chosen), Arc::clone(&count));
    let since = options.since_ms;
    let mut reader = TopicReader::open_counted(
        kafka,
        &options.topic,
        false,
        options.idle_timeout,
        move |partition, partitions| {
            count_in.store(partitions, Ordering::Relaxed);
            let wanted = partition_for(&key, partitions)?;
            chosen_in.store(wanted, Ordering::Relaxed);
            (partition == wanted).then_some(match since {
                Some(ms) => Start::Time(ms.saturating_sub(TIME_SEEK_MARGIN_MS)),
                None => Start::Beginning,
            })
        },
    )
    .await?;
    let mut records = Vec::new();
    let (mut scanned, mut undecodable) = (0_u64, 0_u64);
    while let Some(message) = reader.next().await? {
        scanned += 1;
        if message.key() != Some(event_id.as_bytes()) {
            continue;
        }
        let Some(bytes) = message.payload() else {
            undecodable += 1;
            continue;
        };
        let value = match registry.decode(bytes).await {
            Ok(value) => value,
            Err(source) if source.is_transient() => {
                return Err(DlqError::Registry {
                    context: format!(
                        "decoding attempt record {}/{} through the schema registry",
                        message.partition(),
                        message.offset()
                    ),
                    source: Box::new(source),
                });
            }
            Err(error) => {
                tracing::debug!(%error, offset = message.offset(), "an undecodable attempt record");
                undecodable += 1;
                continue;
            }
        };
        match AttemptRecord::from_avro_value(value) {
            Ok(record) => records.push(record),
            Err(error) => {
                tracing::debug!(%error, offset = message.offset(), "not an attempt record");
                undecodable += 1;
            }
        }
    }
    Ok(Lookup {
        story: Story::build(event_id, records),
        topic: options.topic.clone(),
        partition: chosen.load(Ordering::Relaxed),
        partitions: count.load(Ordering::Relaxed),
        records_scanned: scanned,
        undecodable,
    })
}
