//! Errors of the console.

use hookline_dlq::DlqError;

/// A `Result` with this crate's [`ConsoleError`].
pub type Result<T, E = ConsoleError> = std::result::Result<T, E>;

/// What went wrong starting or serving the console.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// A config field is invalid; the message names the field, never a secret's value.
    #[error("{field}: {reason}")]
    Config {
        /// The field, e.g. `console.session_key`.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The listen address could not be bound.
    #[error("listening on {addr}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server failed.
    #[error("serving the console")]
    Serve(#[source] std::io::Error),
    /// A token could not be hashed.
    #[error("hashing the token: {0}")]
    Hash(String),
    /// The endpoint table's client could not be made.
    #[error(transparent)]
    Endpoints(#[from] hookline_producer::EndpointStoreError),
    /// Reading or acting on the DLQ failed.
    #[error(transparent)]
    Dlq(#[from] DlqError),
    /// The archive destination (`console.archive_to`, reached with the `[archive]`
    /// section's settings) could not be opened.
    #[error("console.archive_to: the archive destination cannot be opened")]
    Archive(#[source] hookline_dlq::archive::store::StoreError),
    /// The overview and endpoints pages' reader could not be made, or its settings are
    /// invalid (the error names the `console.insight` field).
    #[error(transparent)]
    Insight(#[from] Box<crate::insight::InsightError>),
}

impl ConsoleError {
    pub(crate) fn config(field: impl Into<String>, reason: impl Into<String>) -> ConsoleError {
        ConsoleError::Config {
            field: field.into(),
            reason: reason.into(),
        }
    }
}
