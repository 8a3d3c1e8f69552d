//! Why the endpoint or overview figures could not be gathered.

use hookline_dlq::DlqError;
use hookline_producer::EndpointStoreError;
use hookline_producer::endpoints::SwitchError;
use rdkafka::error::KafkaError;

/// A `Result` with [`InsightError`].
pub type Result<T, E = InsightError> = std::result::Result<T, E>;

/// What went wrong. Messages name fields and topics, never a secret or a URL's query.
#[derive(Debug, thiserror::Error)]
pub enum InsightError {
    /// A `[console.insight]` field is invalid.
    #[error("invalid `{field}`: {reason}")]
    Config {
        /// The field, e.g. `console.insight.health_window_s`.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The attempt log or the DLQ topic could not be read.
    #[error("reading {topic}")]
    Read {
        /// The topic.
        topic: String,
        /// The reader's error.
        #[source]
        source: Box<DlqError>,
    },
    /// A Kafka call (metadata, watermarks, committed offsets) failed.
    #[error("kafka: {context}")]
    Kafka {
        /// What was being done.
        context: String,
        /// The client's error.
        #[source]
        source: KafkaError,
    },
    /// The endpoint table could not be read.
    #[error("reading the endpoint table")]
    Endpoints(#[source] Box<EndpointStoreError>),
    /// An endpoint could not be enabled or disabled (nothing was written).
    #[error(transparent)]
    Switch(#[from] SwitchError),
    /// The HTTP client for the dispatchers' `/metrics` could not be built.
    #[error("building the HTTP client for the dispatchers' metrics")]
    HttpClient(#[source] reqwest::Error),
}

impl InsightError {
    pub(crate) fn config(field: &str, reason: impl Into<String>) -> Self {
        InsightError::Config {
            field: format!("console.insight.{field}"),
            reason: reason.into(),
        }
    }

    pub(crate) fn kafka(context: impl Into<String>) -> impl FnOnce(KafkaError) -> Self {
        let context = context.into();
        move |source| InsightError::Kafka { context, source }
    }
}
