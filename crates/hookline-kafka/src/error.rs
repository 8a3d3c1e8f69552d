//! Errors of the Kafka and registry plumbing.

use rdkafka::error::KafkaError;
use schema_registry_converter::error::SRCError;

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong talking to Kafka or the schema registry.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kafka client could not be created or a Kafka call failed.
    #[error("kafka: {context}")]
    Kafka {
        /// What hookline was doing.
        context: String,
        /// The client's error.
        #[source]
        source: KafkaError,
    },
    /// Creating a topic failed for a reason other than that it exists already.
    #[error("creating topic {topic}: {code}")]
    CreateTopic {
        /// The topic.
        topic: String,
        /// The broker's error code.
        code: rdkafka::types::RDKafkaErrorCode,
    },
    /// The registry could not be reached or answered with an error.
    #[error("schema registry at {url}: {context}")]
    RegistryHttp {
        /// The registry's base URL.
        url: String,
        /// What hookline was doing.
        context: String,
        /// The HTTP client's error.
        #[source]
        source: reqwest::Error,
    },
    /// The registry refused a request (an incompatible schema, an unknown subject...).
    #[error("schema registry refused {context}: HTTP {status}: {body}")]
    RegistryRefused {
        /// What hookline was doing.
        context: String,
        /// The HTTP status.
        status: u16,
        /// The registry's answer.
        body: String,
    },
    /// Encoding or decoding Confluent-framed Avro failed.
    #[error("avro through the registry: {context}")]
    Avro {
        /// What hookline was doing.
        context: String,
        /// The converter's error, which says whether a retry may help.
        #[source]
        source: SRCError,
    },
}

impl Error {
    /// Whether trying again later may succeed (the registry or broker was unreachable),
    /// as opposed to a refusal that will not change.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Kafka { .. } | Error::RegistryHttp { .. } => true,
            Error::CreateTopic { .. } => false,
            Error::RegistryRefused { status, .. } => *status >= 500,
            Error::Avro { source, .. } => source.retriable,
        }
    }
}
