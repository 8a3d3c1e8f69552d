//! The webhook event record, in its Avro and JSON encodings: one event to one endpoint (a
//! delivery), or one event to a tenant (a tenant event, fanned out to the tenant's
//! subscribed endpoints, each then a delivery of its own).

mod avro;
mod json;
mod validate;

use std::collections::BTreeMap;

use crate::avro_util::FieldProblem;
use crate::envelope::ErrorReason;

pub use crate::http_field::RESERVED_HEADERS;
pub use validate::{
    MAX_CHANNEL_LEN, MAX_CHANNELS, MAX_EVENT_TYPE_LEN, MAX_HEADER_VALUE_LEN, MAX_HEADERS,
    MAX_ID_LEN, MAX_URL_LEN,
};

/// Content type of a payload when the event does not say.
pub const DEFAULT_CONTENT_TYPE: &str = "application/json";

/// One event: a delivery to one endpoint (`endpoint_id` set; the value of a record in
/// `webhook-events`), or a tenant event (`endpoint_id` unset, `tenant_id` set; the value of
/// a record in the fan-out topic).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEvent {
    /// Unique id, sent as `webhook-id`; stable across retries and re-drives.
    pub event_id: String,
    /// Type of the event, e.g. `invoice.paid`.
    pub event_type: String,
    /// Id of the endpoint to deliver to (also the record key); `None` for a tenant event.
    pub endpoint_id: Option<String>,
    /// The tenant the event belongs to; a tenant event goes to each of the tenant's
    /// endpoints subscribed to its type and channels.
    pub tenant_id: Option<String>,
    /// Channels the event is sent on; an endpoint subscribed to channels receives only
    /// events that carry one of them.
    pub channels: Vec<String>,
    /// URL overriding the endpoint's configured URL for this delivery.
    pub endpoint_url: Option<String>,
    /// The exact HTTP request body.
    pub payload: Vec<u8>,
    /// Content-Type of the payload.
    pub content_type: String,
    /// Extra HTTP request headers.
    pub headers: BTreeMap<String, String>,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// Deadline, milliseconds since the Unix epoch: a delivery not made by then is not
    /// attempted again and is parked as expired. `None`: no deadline.
    pub expires_at_ms: Option<i64>,
}

impl WebhookEvent {
    /// Whether the deadline has passed at `at_ms`, or would have by then (a retry due at
    /// `at_ms`): a deadline equal to `at_ms` has passed. Without a deadline, never.
    pub fn expired_at(&self, at_ms: i64) -> bool {
        self.expires_at_ms.is_some_and(|deadline| at_ms >= deadline)
    }
}

/// What is wrong with an event, naming the field.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The bytes are not JSON of the event shape.
    #[error("invalid JSON event: {0}")]
    Json(#[source] serde_json::Error),
    /// The bytes are not an Avro event datum.
    #[error("invalid Avro event: {0}")]
    Avro(#[source] apache_avro::Error),
    /// The Avro datum has bytes left over after the event.
    #[error("Avro event datum has {0} trailing bytes")]
    TrailingBytes(usize),
    /// The Avro value is not a record.
    #[error("Avro value is not a WebhookEvent record")]
    NotARecord,
    /// A required field is missing.
    #[error("missing field `{field}`")]
    MissingField {
        /// The field.
        field: &'static str,
    },
    /// A field has the wrong type.
    #[error("field `{field}` must be {expected}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// Both `payload` and `payload_base64` are set in JSON.
    #[error("both `payload` and `payload_base64` are set; use one")]
    PayloadConflict,
    /// `payload_base64` is not valid base64.
    #[error("field `payload_base64` is not valid base64: {0}")]
    Base64(#[source] base64::DecodeError),
    /// A required text field is empty.
    #[error("field `{field}` must not be empty")]
    Empty {
        /// The field.
        field: &'static str,
    },
    /// A text field is too long.
    #[error("field `{field}` is {len} bytes, over the limit of {max}")]
    TooLong {
        /// The field.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A text field holds characters it may not.
    #[error("field `{field}` {rule}")]
    InvalidChars {
        /// The field.
        field: &'static str,
        /// The rule it breaks, e.g. "must be visible ASCII".
        rule: &'static str,
    },
    /// The payload is larger than allowed.
    #[error("payload is {size} bytes, over the limit of {max}")]
    PayloadTooLarge {
        /// Payload size in bytes.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// There are too many extra headers.
    #[error("event has {count} headers, over the limit of {max}")]
    TooManyHeaders {
        /// How many there are.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A header name is not an HTTP token.
    #[error("header name `{name}` is not a valid HTTP token")]
    InvalidHeaderName {
        /// The header name.
        name: String,
    },
    /// A header is one the dispatcher sets itself.
    #[error("header `{name}` is set by the dispatcher and cannot be given in an event")]
    ReservedHeader {
        /// The header name.
        name: String,
    },
    /// A header value has characters not allowed in HTTP, or is too long.
    #[error("value of header `{name}` must be at most {max} bytes of tab, space or visible ASCII", max = MAX_HEADER_VALUE_LEN)]
    InvalidHeaderValue {
        /// The header name.
        name: String,
    },
    /// There are too many channels.
    #[error("event has {count} channels, over the limit of {max}")]
    TooManyChannels {
        /// How many there are.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// The event names neither an endpoint nor a tenant.
    #[error("the event names neither `endpoint_id` nor `tenant_id`; set one")]
    NoRecipient,
    /// Two header names differ only in case.
    #[error("header `{name}` is given twice (header names are case-insensitive)")]
    DuplicateHeader {
        /// The header name.
        name: String,
    },
}

impl EventError {
    /// The DLQ reason for an event rejected with this error.
    pub fn reason(&self) -> ErrorReason {
        match self {
            EventError::PayloadTooLarge { .. } => ErrorReason::PayloadTooLarge,
            EventError::Json(_)
            | EventError::Avro(_)
            | EventError::TrailingBytes(_)
            | EventError::NotARecord
            | EventError::MissingField { .. }
            | EventError::WrongType { .. }
            | EventError::PayloadConflict
            | EventError::Base64(_)
            | EventError::Empty { .. }
            | EventError::TooLong { .. }
            | EventError::InvalidChars { .. }
            | EventError::TooManyHeaders { .. }
            | EventError::InvalidHeaderName { .. }
            | EventError::ReservedHeader { .. }
            | EventError::InvalidHeaderValue { .. }
            | EventError::NoRecipient
            | EventError::TooManyChannels { .. }
            | EventError::DuplicateHeader { .. } => ErrorReason::MalformedEvent,
        }
    }
}

impl From<FieldProblem> for EventError {
    fn from(p: FieldProblem) -> Self {
        match p {
            FieldProblem::NotARecord => EventError::NotARecord,
            FieldProblem::Missing { field } => EventError::MissingField { field },
            FieldProblem::WrongType { field, expected } => {
                EventError::WrongType { field, expected }
            }
        }
    }
}

/// The schema id of a Confluent-framed record value: `Some(id)` when `bytes` starts with
/// the magic byte 0 followed by a 4-byte big-endian id.
pub fn confluent_schema_id(bytes: &[u8]) -> Option<u32> {
    crate::framing::split(bytes).map(|(id, _)| id)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An event with every field set, for tests across the crate.
    pub(crate) fn sample() -> WebhookEvent {
        WebhookEvent {
            event_id: "evt_123".into(),
            event_type: "invoice.paid".into(),
            endpoint_id: Some("ep_1".into()),
            tenant_id: Some("acme".into()),
            channels: vec!["eu".into()],
            endpoint_url: Some("https://example.com/hook".into()),
            payload: br#"{"amount":42,"currency":"EUR"}"#.to_vec(),
            content_type: DEFAULT_CONTENT_TYPE.into(),
            headers: BTreeMap::from([("X-Tenant".to_owned(), "acme".to_owned())]),
            created_at_ms: 1_700_000_000_123,
            expires_at_ms: Some(1_700_000_600_000),
        }
    }

    #[test]
    fn confluent_framing() {
        assert_eq!(confluent_schema_id(&[0, 0, 0, 0, 7]), Some(7));
        assert_eq!(
            confluent_schema_id(&[0, 1, 2, 3, 4, 9, 9]),
            Some(0x0102_0304)
        );
        assert_eq!(confluent_schema_id(&[0, 0, 0, 7]), None);
        assert_eq!(confluent_schema_id(&[1, 0, 0, 0, 7]), None);
        assert_eq!(confluent_schema_id(b"{\"event_id\":1}"), None);
        let framed = crate::framing::frame(42, b"abc");
        assert_eq!(confluent_schema_id(&framed), Some(42));
        assert_eq!(&framed[5..], b"abc");
    }

    proptest::proptest! {
        #![proptest_config(crate::fuzz::config(512))]

        /// Any bytes: an id exactly when they start with the magic byte and four more, and
        /// framing gives back the id and the datum.
        #[test]
        fn confluent_framing_of_any_bytes(bytes in crate::fuzz::bytes(), id in proptest::prelude::any::<u32>()) {
            let framed = bytes.len() >= 5 && bytes[0] == 0;
            proptest::prop_assert_eq!(confluent_schema_id(&bytes).is_some(), framed);
            let frame = crate::framing::frame(id, &bytes);
            proptest::prop_assert_eq!(confluent_schema_id(&frame), Some(id));
            proptest::prop_assert_eq!(&frame[5..], &bytes[..]);
        }
    }

    #[test]
    fn expiry_is_reached_at_the_deadline() {
        let event = sample();
        let deadline = 1_700_000_600_000;
        assert!(!event.expired_at(deadline - 1));
        assert!(event.expired_at(deadline));
        assert!(event.expired_at(deadline + 1));
        let no_deadline = WebhookEvent {
            expires_at_ms: None,
            ..sample()
        };
        assert!(!no_deadline.expired_at(i64::MAX));
    }

    #[test]
    fn reasons() {
        let too_large = EventError::PayloadTooLarge { size: 2, max: 1 };
        assert_eq!(too_large.reason(), ErrorReason::PayloadTooLarge);
        assert_eq!(
            EventError::MissingField { field: "event_id" }.reason(),
            ErrorReason::MalformedEvent
        );
    }
}
