//! Why a [`DedupStore`](super::DedupStore) could not answer.

use std::time::Duration;

/// Why the store could not answer. Never holds the store's password or URL.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The Redis URL cannot be used.
    #[error("{url} is not a Redis URL: {source}")]
    BadUrl {
        /// The URL, password hidden.
        url: String,
        /// The client's parse error.
        #[source]
        source: ::redis::RedisError,
    },
    /// A command failed, or the connection did.
    #[error("redis {op} failed: {source}")]
    Redis {
        /// The command.
        op: &'static str,
        /// The client's error.
        #[source]
        source: ::redis::RedisError,
    },
    /// Redis did not answer in time.
    #[error("redis {op} got no answer within {after:?}")]
    Timeout {
        /// The command.
        op: &'static str,
        /// The configured timeout.
        after: Duration,
    },
    /// The store answered something its protocol does not have.
    #[error("{op} answered an unexpected value")]
    Unexpected {
        /// The command.
        op: &'static str,
    },
    /// A setting of the PostgreSQL store cannot be used (the reason never holds the URL or
    /// its password).
    #[cfg(feature = "postgres")]
    #[error("postgres store: {field} {reason}")]
    PgSettings {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A PostgreSQL statement failed, or no connection could be had.
    #[cfg(feature = "postgres")]
    #[error("postgres {op} failed: {source}")]
    Postgres {
        /// The step (`claim`, `succeed`, `release`, `purge`, `migrate`).
        op: &'static str,
        /// The client's error (it never holds the URL).
        #[source]
        source: sqlx::Error,
    },
    /// PostgreSQL did not answer in time.
    #[cfg(feature = "postgres")]
    #[error("postgres {op} got no answer within {after:?}")]
    PgTimeout {
        /// The step.
        op: &'static str,
        /// The configured timeout.
        after: Duration,
    },
    /// The store's tables could not be created or brought up to date.
    #[cfg(feature = "postgres")]
    #[error("postgres migrations failed: {source}")]
    Migrate {
        /// The migrator's error.
        #[source]
        source: sqlx::migrate::MigrateError,
    },
}

impl StoreError {
    /// The failing operation, a low-cardinality label.
    pub fn op(&self) -> &'static str {
        match self {
            StoreError::BadUrl { .. } => "connect",
            StoreError::Redis { op, .. }
            | StoreError::Timeout { op, .. }
            | StoreError::Unexpected { op } => op,
            #[cfg(feature = "postgres")]
            StoreError::PgSettings { .. } => "connect",
            #[cfg(feature = "postgres")]
            StoreError::Migrate { .. } => "migrate",
            #[cfg(feature = "postgres")]
            StoreError::Postgres { op, .. } | StoreError::PgTimeout { op, .. } => op,
        }
    }
}
