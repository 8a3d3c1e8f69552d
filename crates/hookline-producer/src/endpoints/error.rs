//! Why an endpoint could not be written or the table read.

use rdkafka::error::KafkaError;

/// What went wrong with the endpoint table.
#[derive(Debug, thiserror::Error)]
pub enum EndpointStoreError {
    /// The endpoint id cannot be a key of the table.
    #[error("endpoint id {id:?} {problem}")]
    InvalidId {
        /// The id as given.
        id: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The endpoint config is invalid; nothing was written.
    #[error("endpoint {id:?} has an invalid config")]
    InvalidConfig {
        /// The endpoint id.
        id: String,
        /// What is wrong with it.
        #[source]
        source: hookline_core::endpoint::EndpointError,
    },
    /// A Kafka client could not be created.
    #[error("creating a Kafka client for the endpoint table")]
    Client(#[source] KafkaError),
    /// Kafka did not acknowledge the write.
    #[error("writing endpoint {id:?} to the endpoint table")]
    Send {
        /// The endpoint id.
        id: String,
        /// The producer's error.
        #[source]
        source: KafkaError,
    },
    /// The topic does not exist (`hookline topics create` makes it).
    #[error("the endpoint table topic {topic} does not exist")]
    TopicMissing {
        /// The topic.
        topic: String,
    },
    /// Reading the topic failed.
    #[error("reading the endpoint table {topic}")]
    Read {
        /// The topic.
        topic: String,
        /// The consumer's error.
        #[source]
        source: KafkaError,
    },
    /// The end of the topic was not reached in time.
    #[error("reading the endpoint table {topic}: its end was not reached within {waited_ms} ms")]
    Timeout {
        /// The topic.
        topic: String,
        /// How long it waited, in milliseconds.
        waited_ms: u128,
    },
}
