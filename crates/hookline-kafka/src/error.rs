//! Errors of the Kafka and registry plumbing.

use rdkafka::error::KafkaError;
use schema_registry_converter::error::SRCError;

use crate::registry::{RegistrySettingsError, SchemaRefusal};

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
    /// The registry settings cannot be used (the message names the field).
    #[error(transparent)]
    RegistrySettings(#[from] RegistrySettingsError),
    /// The registry could not be reached or answered with an error.
    #[error("schema registry at {url}: {context}")]
    RegistryHttp {
        /// The registry's base URL, redacted (no user info, no query).
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
    /// Encoding Confluent-framed Avro failed.
    #[error("avro through the registry: {context}")]
    Avro {
        /// What hookline was doing.
        context: String,
        /// The converter's error, which says whether a retry may help.
        #[source]
        source: SRCError,
    },
    /// A value to decode is not Confluent-framed: shorter than the 5-byte header, or with a
    /// first byte other than the magic 0.
    #[error(
        "not Confluent-framed Avro ({len} bytes, first byte {first:?}): expected the magic \
         byte 0 and a 4-byte schema id"
    )]
    NotFramed {
        /// The value's length.
        len: usize,
        /// Its first byte, if any.
        first: Option<u8>,
    },
    /// The registry's writer schema for an id is not valid Avro.
    #[error("writer schema {id} from the registry is not valid Avro: {source}")]
    UnreadableSchema {
        /// The schema id.
        id: u32,
        /// The parser's error.
        #[source]
        source: apache_avro::Error,
    },
    /// A writer schema hookline does not decode with: recursive or nested too deeply
    /// (apache-avro's decoder has no depth limit), or not a self-contained Avro schema.
    #[error("writer schema {id} is not supported: {reason}")]
    UnsupportedSchema {
        /// The schema id.
        id: u32,
        /// Why.
        reason: SchemaRefusal,
    },
    /// A value whose decoded form would take more memory than one record may: refused
    /// before it is decoded.
    #[error(
        "the value would take more than {limit} bytes decoded with writer schema {id}, the \
         most one record may"
    )]
    OverBudget {
        /// The schema id.
        id: u32,
        /// The limit, in bytes.
        limit: usize,
    },
    /// A value does not decode with its writer schema.
    #[error("the value does not decode with writer schema {id}: {source}")]
    Undecodable {
        /// The schema id.
        id: u32,
        /// The decoder's error.
        #[source]
        source: apache_avro::Error,
    },
}

impl Error {
    /// Whether trying again later may succeed (the broker or registry was unreachable, slow,
    /// failing, or refused hookline's credentials), as opposed to an answer that will not
    /// change (an unknown schema id, a bad request, bytes that do not decode).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Kafka { .. } | Error::RegistryHttp { .. } => true,
            Error::CreateTopic { .. } | Error::RegistrySettings(_) => false,
            Error::RegistryRefused { status, .. } => transient_status(*status),
            Error::Avro { source, .. } => source.retriable,
            Error::NotFramed { .. }
            | Error::UnreadableSchema { .. }
            | Error::UnsupportedSchema { .. }
            | Error::OverBudget { .. }
            | Error::Undecodable { .. } => false,
        }
    }
}

/// Whether a registry's HTTP status may change on a later try.
fn transient_status(status: u16) -> bool {
    match status {
        // The registry, or a proxy in front of it, is failing, overloaded or timing out.
        408 | 429 | 500..=599 => true,
        // Credentials or grants that an operator can fix while the events wait.
        401 | 403 => true,
        // A request that will never succeed: unknown id or subject (404), bad or invalid
        // request (400, 422), incompatible schema (409)...
        400 | 402 | 404..=407 | 409..=428 | 430..=499 => false,
        // Not an error answer (a success whose body is unreadable, a redirect not
        // followed), or not an HTTP status at all.
        0..=399 | 600..=u16::MAX => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(status: u16) -> Error {
        Error::RegistryRefused {
            context: "fetching writer schema 1".to_owned(),
            status,
            body: String::new(),
        }
    }

    #[test]
    fn registry_statuses_are_classified() {
        let table = [
            (200, false),
            (302, false),
            (400, false),
            (401, true),
            (403, true),
            (404, false),
            (405, false),
            (408, true),
            (409, false),
            (415, false),
            (422, false),
            (429, true),
            (451, false),
            (500, true),
            (501, true),
            (502, true),
            (503, true),
            (504, true),
            (599, true),
            (600, false),
        ];
        for (status, transient) in table {
            assert_eq!(refused(status).is_transient(), transient, "HTTP {status}");
        }
    }
}
