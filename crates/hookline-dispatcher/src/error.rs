//! Errors that stop a dispatcher from starting or running.

use std::path::PathBuf;

use rdkafka::error::KafkaError;

/// A `Result` with [`DispatchError`].
pub type Result<T, E = DispatchError> = std::result::Result<T, E>;

/// What stops a dispatcher.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// The configuration is invalid; `field` names the setting.
    #[error("`{field}`: {reason}")]
    Config {
        /// The setting, as a dotted path (`retry.base_ms`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The configuration could not be read or parsed.
    #[error("reading the configuration: {0}")]
    ConfigSource(#[source] Box<figment::Error>),
    /// A Kafka call failed.
    #[error("kafka: {context}")]
    Kafka {
        /// What the dispatcher was doing.
        context: String,
        /// The client's error.
        #[source]
        source: KafkaError,
    },
    /// The registry refused or could not be reached at start-up.
    #[error("schema registry: {0}")]
    Registry(#[from] hookline_kafka::Error),
    /// A topic the dispatcher needs does not exist.
    #[error("topic {0} does not exist (create it with `hookline topics create`)")]
    MissingTopic(String),
    /// The static endpoints file could not be used.
    #[error("endpoints file {path}")]
    EndpointsFile {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The admin port could not be bound.
    #[error("admin port {listen}")]
    Admin {
        /// The address.
        listen: String,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// The delivery ledger's Redis did not answer at start-up.
    #[error("delivery ledger at {url} (ledger.redis_url): {source}")]
    Ledger {
        /// The Redis URL, password hidden.
        url: String,
        /// What failed.
        #[source]
        source: crate::ledger::LedgerError,
    },
    /// The HTTP client could not be built.
    #[error("building the HTTP client")]
    Http(#[source] crate::http::ClientError),
    /// Shutdown was asked for before the dispatcher finished starting.
    #[error("shut down during start-up")]
    ShutdownDuringStartup,
    /// A bug: a task panicked or an invariant broke.
    #[error("internal error: {0}")]
    Internal(String),
}

impl DispatchError {
    pub(crate) fn kafka(context: &str, source: KafkaError) -> Self {
        DispatchError::Kafka {
            context: context.to_owned(),
            source,
        }
    }

    pub(crate) fn config(field: &str, reason: impl Into<String>) -> Self {
        DispatchError::Config {
            field: field.to_owned(),
            reason: reason.into(),
        }
    }
}
