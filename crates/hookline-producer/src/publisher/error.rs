//! Why publishing failed.

use hookline_core::EventError;
use rdkafka::error::KafkaError;

/// Why an event was not published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Avro encoding was asked for without a schema registry.
    #[error("the avro encoding needs a schema registry")]
    RegistryRequired,
    /// The Kafka producer could not be created.
    #[error("creating the Kafka producer")]
    Client(#[source] KafkaError),
    /// The event is invalid; nothing was sent.
    #[error("event {event_id:?} is invalid")]
    Invalid {
        /// The event's id (filled in if it was empty).
        event_id: String,
        /// What is wrong with it.
        #[source]
        source: EventError,
    },
    /// The event's `expires_at` has passed already; nothing was sent.
    #[error(
        "event {event_id:?} expires_at {expires_at_ms} (epoch ms) is not after now          ({now_ms}); nothing was sent"
    )]
    Expired {
        /// The event's id.
        event_id: String,
        /// Its deadline, epoch milliseconds.
        expires_at_ms: i64,
        /// The time it was published at, epoch milliseconds.
        now_ms: i64,
    },
    /// The registry could not encode the event; nothing was sent.
    #[error("encoding event {event_id:?} through the schema registry")]
    Encode {
        /// The event's id.
        event_id: String,
        /// The registry's error (boxed: it is large).
        #[source]
        source: Box<hookline_kafka::Error>,
    },
    /// Kafka did not acknowledge the record.
    #[error("sending event {event_id:?} to Kafka")]
    Send {
        /// The event's id.
        event_id: String,
        /// The producer's error.
        #[source]
        source: KafkaError,
    },
    /// Records still queued were not acknowledged in time.
    #[error("flushing the producer")]
    Flush(#[source] KafkaError),
}

impl PublishError {
    /// Whether the event itself was refused (as opposed to a failure of the registry or of
    /// Kafka, where trying again may help).
    pub fn is_invalid_event(&self) -> bool {
        match self {
            PublishError::Invalid { .. } | PublishError::Expired { .. } => true,
            PublishError::RegistryRequired
            | PublishError::Client(_)
            | PublishError::Encode { .. }
            | PublishError::Send { .. }
            | PublishError::Flush(_) => false,
        }
    }
}
