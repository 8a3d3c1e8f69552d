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
    /// The event's `expires_at` passed before the delivery was made (envelope v5).
    Expired,
    /// The event, or its delivery to this endpoint, was cancelled (envelope v5).
    Cancelled,
}

/// The error when a string names no [`ErrorReason`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown error reason `{0}`")]
pub struct UnknownReason(pub String);

impl ErrorReason {
    /// Every reason, in the order of the schema's symbols.
    pub const ALL: [ErrorReason; 10] = [
        ErrorReason::RetriesExhausted,
        ErrorReason::NonRetryableStatus,
        ErrorReason::MalformedEvent,
        ErrorReason::UnknownEndpoint,
        ErrorReason::EndpointDisabled,
        ErrorReason::BlockedUrl,
        ErrorReason::PayloadTooLarge,
        ErrorReason::MaxAgeExceeded,
        ErrorReason::Expired,
        ErrorReason::Cancelled,
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
            ErrorReason::Expired => "EXPIRED",
            ErrorReason::Cancelled => "CANCELLED",
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
            ErrorReason::Expired => "expired",
            ErrorReason::Cancelled => "cancelled",
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
            ErrorReason::Expired => 8,
            ErrorReason::Cancelled => 9,
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

    /// The reasons of envelope v5 are the last symbols, so a v4 record's reason index means
    /// the same under v5.
    #[test]
    fn v5_adds_expired_and_cancelled_after_the_v4_symbols() {
        let v4 = Schema::parse_str(crate::schema::DLQ_ENVELOPE_V4).expect("v4");
        let Schema::Record(record) = &v4 else {
            panic!("not a record");
        };
        let field = record.fields.iter().find(|f| f.name == "error_reason");
        let Some(Schema::Enum(e)) = field.map(|f| &f.schema) else {
            panic!("error_reason is not an enum");
        };
        let ours: Vec<&str> = ErrorReason::ALL.iter().map(|r| r.symbol()).collect();
        assert_eq!(ours[..e.symbols.len()], e.symbols[..]);
        assert_eq!(ours[e.symbols.len()..], ["EXPIRED", "CANCELLED"]);
        assert_eq!("expired".parse(), Ok(ErrorReason::Expired));
        assert_eq!("CANCELLED".parse(), Ok(ErrorReason::Cancelled));
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
