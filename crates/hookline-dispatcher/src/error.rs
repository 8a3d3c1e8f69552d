//! Errors that stop a dispatcher from starting or running, and those of its parts that
//! they carry: the delivery ledger's and the HTTP client's.

use std::path::PathBuf;
use std::time::Duration;

use rdkafka::error::KafkaError;
use redis::RedisError;

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
    /// A topic the dispatcher makes itself (the slow lane) could not be created.
    #[error("creating topic {topic}")]
    CreateTopic {
        /// The topic.
        topic: String,
        /// Why.
        #[source]
        source: Box<hookline_kafka::Error>,
    },
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
        source: LedgerError,
    },
    /// The HTTP client could not be built.
    #[error("building the HTTP client")]
    Http(#[source] ClientError),
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

/// Why a client could not be built: the TLS library refused its connector (its roots or
/// identity).
#[derive(Debug, thiserror::Error)]
#[error("building the TLS connector: {0}")]
pub struct ClientError(#[from] native_tls::Error);

/// A `Result` with [`LedgerError`].
pub type LedgerResult<T> = std::result::Result<T, LedgerError>;

/// Why the ledger could not answer.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The ledger's URL is not a Redis URL.
    #[error("{url} is not a Redis URL: {source}")]
    BadUrl {
        /// The URL, password hidden.
        url: String,
        /// The client's parse error.
        #[source]
        source: RedisError,
    },
    /// Redis answered a command with an error, or the connection failed.
    #[error("redis {op} failed: {source}")]
    Redis {
        /// The command.
        op: &'static str,
        /// The client's error.
        #[source]
        source: RedisError,
    },
    /// Redis did not answer in time.
    #[error("redis {op} got no answer within {after:?}")]
    Timeout {
        /// The command.
        op: &'static str,
        /// The configured timeout.
        after: Duration,
    },
    /// Redis answered, but not what the command answers.
    #[error("redis {op} answered {answer:?}")]
    Unexpected {
        /// The command.
        op: &'static str,
        /// What it answered.
        answer: String,
    },
    /// A PostgreSQL statement failed, or no connection could be had.
    #[error("postgres {op} failed: {source}")]
    Postgres {
        /// The step (`claim`, `finish`, `release`, `retention`, `connect`).
        op: &'static str,
        /// The client's error (it never holds the URL).
        #[source]
        source: sqlx::Error,
    },
    /// PostgreSQL did not answer in time.
    #[error("postgres {op} got no answer within {after:?}")]
    PostgresTimeout {
        /// The step.
        op: &'static str,
        /// The configured timeout.
        after: Duration,
    },
    /// The ledger's tables could not be created or brought up to date.
    #[error("postgres migrations failed: {source}")]
    Migrate {
        /// The migrator's error.
        #[source]
        source: sqlx::migrate::MigrateError,
    },
}

impl LedgerError {
    /// The failing command, a low-cardinality label.
    pub fn op(&self) -> &'static str {
        match self {
            LedgerError::BadUrl { .. } => "connect",
            LedgerError::Migrate { .. } => "migrate",
            LedgerError::Redis { op, .. }
            | LedgerError::Timeout { op, .. }
            | LedgerError::Unexpected { op, .. }
            | LedgerError::Postgres { op, .. }
            | LedgerError::PostgresTimeout { op, .. } => op,
        }
    }

    /// The store that failed, a label: `redis` or `postgres`.
    pub fn store(&self) -> &'static str {
        match self {
            LedgerError::BadUrl { .. }
            | LedgerError::Redis { .. }
            | LedgerError::Timeout { .. }
            | LedgerError::Unexpected { .. } => "redis",
            LedgerError::Postgres { .. }
            | LedgerError::PostgresTimeout { .. }
            | LedgerError::Migrate { .. } => "postgres",
        }
    }
}
