//! Reading the actions topic into per-record histories, and writing actions to it.

use std::collections::HashMap;
use std::time::Duration;

use hookline_kafka::KafkaSettings;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};

use super::{Action, History, StoredAction};
use crate::error::{DlqError, Result};
use crate::reader::{Start, TopicReader, topic_exists};
use crate::record::RecordRef;

/// Every record's actions, as read from the actions topic.
#[derive(Clone, Debug, Default)]
pub struct ActionLog {
    histories: HashMap<RecordRef, History>,
    /// Whether the actions topic exists (a missing one reads as empty).
    pub exists: bool,
    /// Action records that could not be read (key or value), kept for the caller to report.
    pub unreadable: Vec<String>,
}

impl ActionLog {
    /// Reads `topic` to its end. A topic that does not exist is an empty log.
    pub async fn load(kafka: &KafkaSettings, topic: &str) -> Result<ActionLog> {
        let mut reader =
            match TopicReader::open(kafka, topic, false, Duration::from_secs(30), |_| {
                Some(Start::Beginning)
            })
            .await
            {
                Ok(reader) => reader,
                Err(DlqError::TopicNotFound { .. }) => return Ok(ActionLog::default()),
                Err(other) => return Err(other),
            };
        let mut log = ActionLog {
            exists: true,
            ..ActionLog::default()
        };
        while let Some(message) = reader.next().await? {
            let place = format!("{}/{}", message.partition(), message.offset());
            let key = message
                .key()
                .and_then(|k| std::str::from_utf8(k).ok())
                .and_then(|k| k.parse::<RecordRef>().ok());
            let Some(key) = key else {
                log.unreadable.push(format!(
                    "{topic} {place}: the key is not <partition>/<offset>"
                ));
                continue;
            };
            let Some(value) = message.payload() else {
                // A tombstone: the key's history was deleted on purpose.
                log.histories.remove(&key);
                continue;
            };
            match serde_json::from_slice::<StoredAction>(value) {
                Ok(stored) => log.histories.entry(key).or_default().merge(stored),
                Err(error) => log
                    .unreadable
                    .push(format!("{topic} {place}: not an action: {error}")),
            }
        }
        Ok(log)
    }

    /// The actions on the record at `place` (empty when there are none).
    pub fn history(&self, place: RecordRef) -> History {
        self.histories.get(&place).cloned().unwrap_or_default()
    }

    /// Records an action written, so that later reads of this log see it.
    pub fn add(&mut self, place: RecordRef, action: Action) {
        self.histories.entry(place).or_default().0.push(action);
    }

    /// How many records have actions.
    pub fn len(&self) -> usize {
        self.histories.len()
    }

    /// Whether no record has actions.
    pub fn is_empty(&self) -> bool {
        self.histories.is_empty()
    }
}

/// Writes actions, each acknowledged by Kafka (idempotent producer, `acks=all`).
pub struct ActionWriter {
    producer: FutureProducer,
    topic: String,
}

impl ActionWriter {
    /// A writer to `topic`, which must exist ([`DlqError::TopicNotFound`] otherwise: it is
    /// provisioned compacted by `hookline topics create`, and hookline does not create it
    /// with guessed settings).
    pub async fn new(kafka: &KafkaSettings, topic: &str) -> Result<ActionWriter> {
        if !topic_exists(kafka, topic).await? {
            return Err(DlqError::TopicNotFound {
                topic: topic.to_owned(),
            });
        }
        let producer = kafka
            .producer_config()
            .create()
            .map_err(DlqError::kafka("creating the actions producer"))?;
        Ok(ActionWriter {
            producer,
            topic: topic.to_owned(),
        })
    }

    /// Writes `action` on the record at `place`, carrying its earlier actions from `log`,
    /// and adds it to `log` once acknowledged.
    pub async fn write(&self, log: &mut ActionLog, place: RecordRef, action: Action) -> Result<()> {
        let stored = StoredAction {
            action: action.clone(),
            earlier: log.history(place).0,
        };
        let value = serde_json::to_vec(&stored).map_err(|source| DlqError::Json {
            context: "an action".to_owned(),
            source,
        })?;
        let key = place.to_string();
        self.producer
            .send(
                FutureRecord::to(&self.topic).key(&key).payload(&value),
                Duration::from_secs(30),
            )
            .await
            .map_err(|(source, _)| DlqError::Send {
                context: format!(
                    "writing the {} action on {key} to {}",
                    action.action.as_str(),
                    self.topic
                ),
                source,
            })?;
        log.add(place, action);
        Ok(())
    }
}
