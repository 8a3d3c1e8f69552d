//! Why a delivery was parked in the dead-letter topic.

use std::fmt;
use std::str::FromStr;

/// Why a delivery was parked: the `ErrorReason` enum of the DLQ envelope schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorReason {
    /// Every allowed attempt failed with a retryable error.
    RetriesExhausted,
    /// The endpoint answered with a final status (most 4xx, or a 3xx redirect, which is not followed).
    NonRetryableStatus,
    /// The record could not be decoded or failed validation.
    MalformedEvent,
    /// No endpoint with this id is configured.
    UnknownEndpoint,
    /// The endpoint is configured but disabled.
    EndpointDisabled,
    /// The URL is invalid or resolves to an address refused by the SSRF policy.
    BlockedUrl,
    /// The payload exceeds the configured maximum size.
    PayloadTooLarge,
    /// The retry policy's maximum age passed before the delivery succeeded.
    MaxAgeExceeded,
}

/// The error when a string names no [`ErrorReason`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown error reason `{0}`")]
pub struct UnknownReason(pub String);

impl ErrorReason {
    /// Every reason, in the order of the schema's symbols.
    pub const ALL: [ErrorReason; 8] = [
        ErrorReason::RetriesExhausted,
        ErrorReason::NonRetryableStatus,
        ErrorReason::MalformedEvent,
        ErrorReason::UnknownEndpoint,
        ErrorReason::EndpointDisabled,
        ErrorReason::BlockedUrl,
        ErrorReason::PayloadTooLarge,
        ErrorReason::MaxAgeExceeded,
    ];

    /// The Avro enum symbol, e.g. `RETRIES_EXHAUSTED`.
    pub fn symbol(self) -> &'static str {
        match self {
            ErrorReason::RetriesExhausted => "RETRIES_EXHAUSTED",
            ErrorReason::NonRetryableStatus => "NON_RETRYABLE_STATUS",
            ErrorReason::MalformedEvent => "MALFORMED_EVENT",
            ErrorReason::UnknownEndpoint => "UNKNOWN_ENDPOINT",
            ErrorReason::EndpointDisabled => "ENDPOINT_DISABLED",
            ErrorReason::BlockedUrl => "BLOCKED_URL",
            ErrorReason::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorReason::MaxAgeExceeded => "MAX_AGE_EXCEEDED",
        }
    }

    /// A stable snake_case code for metric labels and logs, e.g. `retries_exhausted`.
    pub fn code(self) -> &'static str {
        match self {
            ErrorReason::RetriesExhausted => "retries_exhausted",
            ErrorReason::NonRetryableStatus => "non_retryable_status",
            ErrorReason::MalformedEvent => "malformed_event",
            ErrorReason::UnknownEndpoint => "unknown_endpoint",
            ErrorReason::EndpointDisabled => "endpoint_disabled",
            ErrorReason::BlockedUrl => "blocked_url",
            ErrorReason::PayloadTooLarge => "payload_too_large",
            ErrorReason::MaxAgeExceeded => "max_age_exceeded",
        }
    }

    /// Position of the symbol in the schema's `symbols` list.
    pub fn index(self) -> u32 {
        match self {
            ErrorReason::RetriesExhausted => 0,
            ErrorReason::NonRetryableStatus => 1,
            ErrorReason::MalformedEvent => 2,
            ErrorReason::UnknownEndpoint => 3,
            ErrorReason::EndpointDisabled => 4,
            ErrorReason::BlockedUrl => 5,
            ErrorReason::PayloadTooLarge => 6,
            ErrorReason::MaxAgeExceeded => 7,
        }
    }
}

impl fmt::Display for ErrorReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl FromStr for ErrorReason {
    type Err = UnknownReason;

    /// Accepts the Avro symbol (`RETRIES_EXHAUSTED`) or the code (`retries_exhausted`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ErrorReason::ALL
            .into_iter()
            .find(|r| r.symbol() == s || r.code() == s)
            .ok_or_else(|| UnknownReason(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::dlq_envelope_schema;
    use apache_avro::Schema;

    #[test]
    fn symbols_match_the_schema_in_order() {
        let Schema::Record(record) = dlq_envelope_schema() else {
            panic!("not a record");
        };
        let field = record
            .fields
            .iter()
            .find(|f| f.name == "error_reason")
            .expect("error_reason field");
        let Schema::Enum(e) = &field.schema else {
            panic!("error_reason is not an enum");
        };
        let ours: Vec<&str> = ErrorReason::ALL.iter().map(|r| r.symbol()).collect();
        assert_eq!(e.symbols, ours);
        for (i, r) in ErrorReason::ALL.iter().enumerate() {
            assert_eq!(r.index() as usize, i);
        }
    }

    #[test]
    fn parses_symbols_and_codes() {
        for r in ErrorReason::ALL {
            assert_eq!(r.symbol().parse::<ErrorReason>(), Ok(r));
            assert_eq!(r.code().parse::<ErrorReason>(), Ok(r));
            assert_eq!(r.to_string(), r.code());
        }
        assert!("retries-exhausted".parse::<ErrorReason>().is_err());
    }
}
