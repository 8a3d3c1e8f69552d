//! Errors of the DLQ tooling.

use std::path::PathBuf;

use rdkafka::error::KafkaError;

use crate::filter::FilterError;

/// A `Result` with this crate's [`DlqError`].
pub type Result<T, E = DlqError> = std::result::Result<T, E>;

/// What went wrong reading, redriving, resolving or archiving dead letters.
#[derive(Debug, thiserror::Error)]
pub enum DlqError {
    /// The selection given is not valid (a reason code, a time, an offset range).
    #[error(transparent)]
    Filter(#[from] FilterError),
    /// The topic does not exist on the cluster.
    #[error(
        "topic {topic} does not exist (is --events-topic right? `hookline topics create` provisions it)"
    )]
    TopicNotFound {
        /// The topic.
        topic: String,
    },
    /// A Kafka client could not be created or a Kafka call failed.
    #[error("kafka: {context}")]
    Kafka {
        /// What was being done.
        context: String,
        /// The client's error.
        #[source]
        source: KafkaError,
    },
    /// A Kafka send failed (after the producer's own retries).
    #[error("kafka: {context}")]
    Send {
        /// What was being done.
        context: String,
        /// The client's error.
        #[source]
        source: KafkaError,
    },
    /// The schema registry could not be reached or answered with an error while decoding.
    #[error("{context}")]
    Registry {
        /// What was being done.
        context: String,
        /// The registry client's error.
        #[source]
        source: Box<hookline_kafka::Error>,
    },
    /// A partition stopped yielding records before its high watermark.
    #[error(
        "timed out reading {topic} partition {partition} at offset {position} (high watermark {high})"
    )]
    ReadTimeout {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The next offset expected.
        position: i64,
        /// Where reading should have stopped.
        high: i64,
    },
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An Avro archive could not be written or read.
    #[error("Avro archive {}: {context}", path.display())]
    Avro {
        /// The file.
        path: PathBuf,
        /// What was being done.
        context: String,
        /// The Avro error.
        #[source]
        source: Box<apache_avro::Error>,
    },
    /// An archive holds something that is not an archived DLQ record.
    #[error("archive {} item {item}: {problem}", path.display())]
    Archive {
        /// The file.
        path: PathBuf,
        /// Which item (1-based line of a JSON lines file, or record of an Avro file).
        item: usize,
        /// What is wrong.
        problem: String,
    },
    /// A value could not be encoded as JSON.
    #[error("encoding {context} as JSON")]
    Json {
        /// What was being encoded.
        context: String,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A redrive rate that is not a number of at least
    /// [`MIN_RATE_PER_S`](crate::redrive::MIN_RATE_PER_S) records per second.
    #[error(
        "a redrive rate of {rate} records per second is not at least {}",
        crate::redrive::MIN_RATE_PER_S
    )]
    InvalidRate {
        /// The rate given.
        rate: f64,
    },
    /// An object-store archive could not be written or read.
    #[error(transparent)]
    Store(#[from] crate::archive::store::StoreError),
    /// A file given as output exists already.
    #[error("{} exists already (nothing written; remove it or choose another file)", path.display())]
    FileExists {
        /// The file.
        path: PathBuf,
    },
}

impl DlqError {
    pub(crate) fn kafka(context: impl Into<String>) -> impl FnOnce(KafkaError) -> DlqError {
        let context = context.into();
        move |source| DlqError::Kafka { context, source }
    }

    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> DlqError + '_ {
        move |source| DlqError::Io {
            path: path.to_owned(),
            source,
        }
    }
}
