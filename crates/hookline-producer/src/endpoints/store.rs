//! Writing endpoint configs to the compacted endpoint table and reading it back.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use hookline_core::endpoint::EndpointConfig;
use hookline_core::event::MAX_ID_LEN;
use hookline_kafka::FutureProducer;
use hookline_kafka::KafkaSettings;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::{EndpointList, EndpointStoreError};

/// Default time allowed for writing an endpoint or reading the whole table.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What [`EndpointStore::put_if_current`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum PutIf {
    /// The config was written.
    Written,
    /// Nothing was written: the table holds this instead of the expected config.
    Changed(Option<Box<EndpointConfig>>),
}

/// Writes and reads the endpoint table (key: endpoint id, value: JSON of
/// [`EndpointConfig`], tombstone: removed).
pub struct EndpointStore {
    settings: KafkaSettings,
    producer: FutureProducer,
    topic: String,
    timeout: Duration,
}

impl fmt::Debug for EndpointStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointStore")
            .field("topic", &self.topic)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl EndpointStore {
    /// A store for the table in `topic`, with an idempotent, `acks=all` producer.
    pub fn new(
        settings: &KafkaSettings,
        topic: impl Into<String>,
    ) -> Result<Self, EndpointStoreError> {
        let producer = settings
            .producer_config()
            .create()
            .map_err(EndpointStoreError::Client)?;
        Ok(EndpointStore {
            settings: settings.clone(),
            producer,
            topic: topic.into(),
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// The same store with another time limit for a write or a full read.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The table's topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Writes (creates or replaces) the config of endpoint `id`, after validating it.
    #[tracing::instrument(skip_all, fields(endpoint = %id))]
    pub async fn put(&self, id: &str, config: &EndpointConfig) -> Result<(), EndpointStoreError> {
        check_id(id)?;
        config
            .validate()
            .map_err(|source| EndpointStoreError::InvalidConfig {
                id: id.to_owned(),
                source,
            })?;
        self.send(id, Some(&config.to_json())).await
    }

    /// Writes `config` for endpoint `id` only when the table holds `expected` for it,
    /// re-read from the topic just before the write: a change made since `expected` was
    /// read (a newer config, a removal, the same change by another replica) is never
    /// overwritten. Kafka has no compare-and-set, so a write landing between the re-read
    /// and this write (milliseconds) is not seen.
    #[tracing::instrument(skip_all, fields(endpoint = %id))]
    pub async fn put_if_current(
        &self,
        id: &str,
        expected: &EndpointConfig,
        config: &EndpointConfig,
    ) -> Result<PutIf, EndpointStoreError> {
        let current = self.get(id).await?;
        if current.as_ref() != Some(expected) {
            return Ok(PutIf::Changed(current.map(Box::new)));
        }
        self.put(id, config).await?;
        Ok(PutIf::Written)
    }

    /// Removes endpoint `id` by writing a tombstone; removing an unknown id is not an error.
    #[tracing::instrument(skip_all, fields(endpoint = %id))]
    pub async fn remove(&self, id: &str) -> Result<(), EndpointStoreError> {
        check_id(id)?;
        self.send(id, None).await
    }

    /// Reads the whole table, from the beginning to the end it had when the read began,
    /// with a consumer of its own (assigned partitions, no group membership, nothing
    /// committed).
    pub async fn list(&self) -> Result<EndpointList, EndpointStoreError> {
        let settings = self.settings.clone();
        let topic = self.topic.clone();
        let timeout = self.timeout;
        // librdkafka's metadata, watermark and poll calls block the calling thread.
        match tokio::task::spawn_blocking(move || read_table(&settings, &topic, timeout)).await {
            Ok(result) => result,
            Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
            Err(_) => Err(EndpointStoreError::Read {
                topic: self.topic.clone(),
                source: KafkaError::Canceled,
            }),
        }
    }

    /// The config of endpoint `id`, if the table has one (reads the whole table).
    pub async fn get(&self, id: &str) -> Result<Option<EndpointConfig>, EndpointStoreError> {
        Ok(self.list().await?.endpoints.remove(id))
    }

    async fn send(&self, id: &str, value: Option<&[u8]>) -> Result<(), EndpointStoreError> {
        let mut record = FutureRecord::<[u8], [u8]>::to(&self.topic).key(id.as_bytes());
        if let Some(value) = value {
            record = record.payload(value);
        }
        match self.producer.send(record, self.timeout).await {
            Ok(delivery) => {
                tracing::info!(
                    partition = delivery.partition,
                    offset = delivery.offset,
                    removed = value.is_none(),
                    "endpoint written"
                );
                Ok(())
            }
            Err((source, _)) => Err(EndpointStoreError::Send {
                id: id.to_owned(),
                source,
            }),
        }
    }
}

fn check_id(id: &str) -> Result<(), EndpointStoreError> {
    let problem = if id.is_empty() {
        "must not be empty"
    } else if id.len() > MAX_ID_LEN {
        "is longer than 256 bytes"
    } else if id.chars().any(char::is_control) {
        "must not contain control characters"
    } else {
        return Ok(());
    };
    Err(EndpointStoreError::InvalidId {
        id: id.to_owned(),
        problem,
    })
}

/// Reads `topic` from the beginning to the high watermarks taken when it starts.
fn read_table(
    settings: &KafkaSettings,
    topic: &str,
    timeout: Duration,
) -> Result<EndpointList, EndpointStoreError> {
    let started = Instant::now();
    let read_error = |source| EndpointStoreError::Read {
        topic: topic.to_owned(),
        source,
    };
    // librdkafka wants a group id even for assign(); with nothing committed and no
    // subscription, the group never joins or appears on the broker.
    let consumer: BaseConsumer = settings
        .client_config()
        .set("group.id", "hookline-endpoint-table-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        .create()
        .map_err(EndpointStoreError::Client)?;

    let metadata = consumer
        .fetch_metadata(Some(topic), timeout)
        .map_err(read_error)?;
    let Some(topic_metadata) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Err(EndpointStoreError::TopicMissing {
            topic: topic.to_owned(),
        });
    };
    if let Some(error) = topic_metadata.error() {
        return Err(match RDKafkaErrorCode::from(error) {
            RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic => {
                EndpointStoreError::TopicMissing {
                    topic: topic.to_owned(),
                }
            }
            code => read_error(KafkaError::MetadataFetch(code)),
        });
    }

    // The high watermark of each partition that has records: where reading stops.
    let mut remaining: HashMap<i32, i64> = HashMap::new();
    let mut assignment = TopicPartitionList::new();
    for partition in topic_metadata.partitions() {
        let (low, high) = consumer
            .fetch_watermarks(topic, partition.id(), timeout)
            .map_err(read_error)?;
        if high > low {
            remaining.insert(partition.id(), high);
            assignment
                .add_partition_offset(topic, partition.id(), Offset::Beginning)
                .map_err(read_error)?;
        }
    }
    let mut list = EndpointList::default();
    if remaining.is_empty() {
        return Ok(list);
    }
    consumer.assign(&assignment).map_err(read_error)?;

    while !remaining.is_empty() {
        if started.elapsed() > timeout {
            return Err(EndpointStoreError::Timeout {
                topic: topic.to_owned(),
                waited_ms: started.elapsed().as_millis(),
            });
        }
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Ok(message)) => {
                list.apply(message.key(), message.payload());
                if remaining
                    .get(&message.partition())
                    .is_some_and(|high| message.offset() + 1 >= *high)
                {
                    remaining.remove(&message.partition());
                }
            }
            // The end of a partition: compaction may have removed the offsets just before
            // its high watermark.
            Some(Err(KafkaError::PartitionEOF(partition))) => {
                remaining.remove(&partition);
            }
            Some(Err(error)) => return Err(read_error(error)),
        }
    }
    tracing::debug!(
        endpoints = list.endpoints.len(),
        unreadable = list.unreadable.len(),
        "endpoint table read"
    );
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert!(check_id("ep_1").is_ok());
        assert!(check_id("").is_err());
        assert!(check_id("a\nb").is_err());
        assert!(check_id(&"x".repeat(257)).is_err());
    }
}
