//! Which publish failures are the task's (counted against its retries) and which are
//! Kafka's or the registry's (the relay backs off; the task keeps its retries).

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use crate::PublishError;

/// What a failed publish says about the task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Kafka or the registry is unreachable or slow: try again later, retries untouched.
    Transient,
    /// The event itself is refused (invalid, expired, too large, an incompatible schema):
    /// counted against the task's retries.
    Permanent,
}

/// Classifies a publish error; no catch-all arm, so a new error forces a decision.
pub fn classify(error: &PublishError) -> Failure {
    match error {
        PublishError::Invalid { .. } | PublishError::Expired { .. } => Failure::Permanent,
        // A relay is never built without a registry for Avro; if it were, no retry helps.
        PublishError::RegistryRequired => Failure::Permanent,
        PublishError::Client(_) | PublishError::Flush(_) => Failure::Transient,
        PublishError::Encode { source, .. } if source.is_transient() => Failure::Transient,
        PublishError::Encode { .. } => Failure::Permanent,
        PublishError::Send { source, .. } => classify_send(source),
    }
}

fn classify_send(error: &KafkaError) -> Failure {
    match error.rdkafka_error_code() {
        Some(
            RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::MessageBatchTooLarge,
        ) => Failure::Permanent,
        _ => Failure::Transient,
    }
}

#[cfg(test)]
mod tests {
    use hookline_core::EventError;

    use super::*;

    #[test]
    fn the_event_is_to_blame_or_not() {
        let invalid = PublishError::Invalid {
            event_id: "e".into(),
            source: EventError::NoRecipient,
        };
        assert_eq!(classify(&invalid), Failure::Permanent);
        let too_large = PublishError::Send {
            event_id: "e".into(),
            source: KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge),
        };
        assert_eq!(classify(&too_large), Failure::Permanent);
        let timed_out = PublishError::Send {
            event_id: "e".into(),
            source: KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut),
        };
        assert_eq!(classify(&timed_out), Failure::Transient);
        let down = PublishError::Send {
            event_id: "e".into(),
            source: KafkaError::MessageProduction(RDKafkaErrorCode::AllBrokersDown),
        };
        assert_eq!(classify(&down), Failure::Transient);
        assert_eq!(
            classify(&PublishError::Flush(KafkaError::Canceled)),
            Failure::Transient
        );
    }
}
