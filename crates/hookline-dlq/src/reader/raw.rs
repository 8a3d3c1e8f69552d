//! Reading a topic's partitions without a consumer group: assign every partition at a
//! chosen offset and read to the high watermarks seen at the start (or follow).

use std::collections::BTreeMap;
use std::time::Duration;

use hookline_kafka::KafkaSettings;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use crate::error::{DlqError, Result};

/// How long a metadata or watermark request may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(15);
/// How often a quiet reader checks whether its partitions are read to the end.
const CHECK_EVERY: Duration = Duration::from_millis(500);

/// Where to start reading one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// At the earliest offset kept.
    Beginning,
    /// At this offset (or the earliest kept, if later).
    Offset(i64),
    /// At the first record whose timestamp is at or after these epoch milliseconds.
    Time(i64),
    /// At the high watermark: only records written from now on (for following).
    End,
}

/// A raw reader of one topic.
pub struct TopicReader {
    topic: String,
    consumer: StreamConsumer,
    /// Partitions still to read, with the offset reading stops at (exclusive); empty and
    /// unused when following.
    remaining: BTreeMap<i32, i64>,
    /// The last offset seen in each partition.
    last_seen: BTreeMap<i32, i64>,
    follow: bool,
    idle_timeout: Duration,
}

impl TopicReader {
    /// Opens `topic`: [`DlqError::TopicNotFound`] when it does not exist. `start` says where
    /// each partition begins (`None` leaves the partition out); when `follow` is false
    /// reading ends at the high watermarks seen now, and a partition that yields nothing
    /// for `idle_timeout` before reaching them is an error.
    pub async fn open(
        kafka: &KafkaSettings,
        topic: &str,
        follow: bool,
        idle_timeout: Duration,
        start: impl Fn(i32) -> Option<Start> + Send + 'static,
    ) -> Result<TopicReader> {
        Self::open_counted(kafka, topic, follow, idle_timeout, move |partition, _| {
            start(partition)
        })
        .await
    }

    /// As [`TopicReader::open`], with `start` also given the topic's partition count (to
    /// read only the partition a key hashes to).
    pub async fn open_counted(
        kafka: &KafkaSettings,
        topic: &str,
        follow: bool,
        idle_timeout: Duration,
        start: impl Fn(i32, i32) -> Option<Start> + Send + 'static,
    ) -> Result<TopicReader> {
        let mut config = kafka.client_config();
        config
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            .set("allow.auto.create.topics", "false")
            // No group is joined; librdkafka wants an id all the same.
            .set("group.id", "hookline-dlq-reader");
        let topic_name = topic.to_owned();
        // Metadata, watermark and offset look-ups block: do them off the runtime.
        tokio::task::spawn_blocking(move || {
            let consumer: StreamConsumer = config
                .create()
                .map_err(DlqError::kafka("creating a consumer"))?;
            let partitions = partitions_of(&consumer, &topic_name)?;
            let count = i32::try_from(partitions.len()).unwrap_or(i32::MAX);
            let mut assignment = TopicPartitionList::new();
            let mut remaining = BTreeMap::new();
            for partition in partitions {
                let Some(start) = start(partition, count) else {
                    continue;
                };
                let (low, high) = consumer
                    .fetch_watermarks(&topic_name, partition, ADMIN_TIMEOUT)
                    .map_err(DlqError::kafka(format!(
                        "reading the watermarks of {topic_name} partition {partition}"
                    )))?;
                let from = match start {
                    Start::Beginning => low,
                    Start::Offset(offset) => offset.max(low),
                    Start::Time(ms) => offset_for_time(&consumer, &topic_name, partition, ms)?
                        .unwrap_or(high)
                        .max(low),
                    Start::End => high,
                };
                if !follow && from >= high {
                    continue;
                }
                assignment
                    .add_partition_offset(&topic_name, partition, Offset::Offset(from))
                    .map_err(DlqError::kafka("building the assignment"))?;
                remaining.insert(partition, high);
            }
            consumer
                .assign(&assignment)
                .map_err(DlqError::kafka(format!("assigning {topic_name}")))?;
            Ok(TopicReader {
                topic: topic_name,
                consumer,
                remaining,
                last_seen: BTreeMap::new(),
                follow,
                idle_timeout,
            })
        })
        .await
        .map_err(|join| DlqError::Kafka {
            context: format!("opening {topic}: the set-up task failed ({join})"),
            source: KafkaError::Canceled,
        })?
    }

    /// The topic read.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The next record, `None` once every partition is read to its high watermark (never
    /// when following).
    pub async fn next(&mut self) -> Result<Option<OwnedMessage>> {
        let mut quiet = Duration::ZERO;
        loop {
            if !self.follow && self.remaining.is_empty() {
                return Ok(None);
            }
            match tokio::time::timeout(CHECK_EVERY, self.consumer.recv()).await {
                Ok(Ok(message)) => {
                    let message = message.detach();
                    let (partition, offset) = (message.partition(), message.offset());
                    self.last_seen.insert(partition, offset);
                    if self.follow {
                        return Ok(Some(message));
                    }
                    let Some(&high) = self.remaining.get(&partition) else {
                        continue;
                    };
                    if offset + 1 >= high {
                        self.remaining.remove(&partition);
                    }
                    if offset < high {
                        return Ok(Some(message));
                    }
                }
                Ok(Err(source)) => {
                    return Err(DlqError::Kafka {
                        context: format!("reading {}", self.topic),
                        source,
                    });
                }
                Err(_) if self.follow => {}
                Err(_) => {
                    // Offsets can be missing below the high watermark (compaction,
                    // transaction markers): the consumer's position says where it is.
                    self.drop_finished();
                    quiet += CHECK_EVERY;
                    if quiet >= self.idle_timeout
                        && let Some((&partition, &high)) = self.remaining.iter().next()
                    {
                        return Err(DlqError::ReadTimeout {
                            topic: self.topic.clone(),
                            partition,
                            position: self.last_seen.get(&partition).map_or(-1, |o| o + 1),
                            high,
                        });
                    }
                }
            }
        }
    }

    fn drop_finished(&mut self) {
        let Ok(positions) = self.consumer.position() else {
            return;
        };
        for element in positions.elements() {
            if let (Offset::Offset(position), Some(&high)) =
                (element.offset(), self.remaining.get(&element.partition()))
                && position >= high
            {
                self.remaining.remove(&element.partition());
            }
        }
    }
}

/// The partitions of `topic`, or [`DlqError::TopicNotFound`].
pub(crate) fn partitions_of(consumer: &StreamConsumer, topic: &str) -> Result<Vec<i32>> {
    let metadata = consumer
        .fetch_metadata(Some(topic), ADMIN_TIMEOUT)
        .map_err(DlqError::kafka(format!("reading the metadata of {topic}")))?;
    let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Err(DlqError::TopicNotFound {
            topic: topic.to_owned(),
        });
    };
    match found.error().map(RDKafkaErrorCode::from) {
        None => {}
        Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {
            return Err(DlqError::TopicNotFound {
                topic: topic.to_owned(),
            });
        }
        Some(code) => {
            return Err(DlqError::Kafka {
                context: format!("reading the metadata of {topic}"),
                source: KafkaError::MetadataFetch(code),
            });
        }
    }
    if found.partitions().is_empty() {
        return Err(DlqError::TopicNotFound {
            topic: topic.to_owned(),
        });
    }
    Ok(found.partitions().iter().map(|p| p.id()).collect())
}

/// Whether `topic` exists, checked with a short-lived client off the runtime.
pub async fn topic_exists(kafka: &KafkaSettings, topic: &str) -> Result<bool> {
    let mut config = kafka.client_config();
    config
        .set("allow.auto.create.topics", "false")
        .set("group.id", "hookline-dlq-reader");
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let consumer: StreamConsumer = config
            .create()
            .map_err(DlqError::kafka("creating a consumer"))?;
        match partitions_of(&consumer, &topic) {
            Ok(_) => Ok(true),
            Err(DlqError::TopicNotFound { .. }) => Ok(false),
            Err(other) => Err(other),
        }
    })
    .await
    .map_err(|join| DlqError::Kafka {
        context: format!("looking up a topic: the task failed ({join})"),
        source: KafkaError::Canceled,
    })?
}

fn offset_for_time(
    consumer: &StreamConsumer,
    topic: &str,
    partition: i32,
    ms: i64,
) -> Result<Option<i64>> {
    let mut query = TopicPartitionList::new();
    query
        .add_partition_offset(topic, partition, Offset::Offset(ms))
        .map_err(DlqError::kafka("building an offsets-for-times query"))?;
    let answer = consumer
        .offsets_for_times(query, ADMIN_TIMEOUT)
        .map_err(DlqError::kafka(format!(
            "finding the offset of time {ms} in {topic} partition {partition}"
        )))?;
    Ok(answer
        .elements()
        .iter()
        .find(|e| e.partition() == partition)
        .and_then(|e| match e.offset() {
            Offset::Offset(offset) => Some(offset),
            _ => None,
        }))
}
