//! Why an outbox call failed.

use std::time::Duration;

use hookline_core::EventError;

/// Why an outbox call failed. Never holds the database URL or its password.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// A setting is invalid; names the field.
    #[error("outbox.{field}: {reason}")]
    Config {
        /// The field, as in the `[outbox]` section.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The event is invalid; nothing was written.
    #[error("the event is invalid")]
    Invalid(#[source] EventError),
    /// The event id is neither empty nor a UUID (the task id is a UUID).
    #[error("event_id {0:?} is not a UUID (the outbox's task id is the event id)")]
    EventId(String),
    /// The payload is not JSON (the `payload` column is `json`).
    #[error("the payload is not JSON (the outbox's payload column is json)")]
    PayloadNotJson(#[source] serde_json::Error),
    /// A statement failed.
    #[error("PostgreSQL: {op}")]
    Postgres {
        /// The step (`enqueue`, `claim`, `complete`...).
        op: &'static str,
        /// The client's error.
        #[source]
        source: sqlx::Error,
    },
    /// A statement took longer than the timeout.
    #[error("PostgreSQL: {op} took longer than {after:?}")]
    Timeout {
        /// The step.
        op: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// The outbox table could not be created or brought up to date.
    #[error("PostgreSQL: migrating the outbox table")]
    Migrate(#[source] sqlx::migrate::MigrateError),
}

impl OutboxError {
    pub(crate) fn config(field: &'static str, reason: impl Into<String>) -> Self {
        OutboxError::Config {
            field,
            reason: reason.into(),
        }
    }
}
