//! The dead-letter envelope: a parked delivery with its original record and the reason.
//!
//! Schema `schemas/dlq_envelope.v5.avsc` (written), which also reads records written with
//! `v1` to `v4`. It keeps the original key, value and headers byte for byte, so a record
//! can be re-driven unchanged, and holds no endpoint configuration: no secrets, and the URL
//! only without its query string (see [`redact_url`](crate::url_guard::redact_url)).
//!
//! Version 2 adds `trace_id`, the W3C trace id of the original record's `traceparent`
//! header, so that registry-aware tools show and filter by it. It is not stored in
//! [`DlqEnvelope`]: [`DlqEnvelope::trace_id`] derives it from the headers the envelope keeps
//! anyway, so the two can never disagree.
//!
//! Version 3 adds `original_payload_truncated` and `original_payload_size`: an envelope too
//! large for the DLQ topic is cut to fit by [`DlqEnvelope::fit_within`] (the payload first)
//! and says so, instead of being a write that can never succeed.
//!
//! Version 4 adds `tenant_id`, the tenant of the parked event (set on every delivery fanned
//! out from a tenant event), so the DLQ can be inspected and re-driven by tenant.
//!
//! Version 5 adds the reasons `EXPIRED` (the event's `expires_at` passed) and `CANCELLED`
//! (`hookline events cancel`) at the end of the reason enum; no field changes.

mod avro;
mod fit;
#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod fuzz;
mod reason;

pub use fit::Fit;
pub use reason::{ErrorReason, UnknownReason};

use crate::headers::TRACEPARENT;

/// The envelope layout version written by this crate: that of
/// [`DLQ_ENVELOPE_CURRENT`](crate::schema::DLQ_ENVELOPE_CURRENT).
pub const ENVELOPE_VERSION: i32 = 5;

/// Longest `error_message` written, in bytes; longer messages are cut at a char boundary.
pub const MAX_ERROR_MESSAGE_LEN: usize = 2048;

/// A delivery parked in the dead-letter topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DlqEnvelope {
    /// Layout version the record was parked with: [`ENVELOPE_VERSION`] when written, 1 to 4
    /// for a record read back that was written with that version.
    pub envelope_version: i32,
    /// The event id; for a record that could not be parsed, [`derived_event_id`].
    pub event_id: String,
    /// The event type, `None` when the record could not be parsed.
    pub event_type: Option<String>,
    /// The endpoint id, `None` when the record could not be parsed.
    pub endpoint_id: Option<String>,
    /// The URL delivered to, without query or fragment; `None` when none was chosen.
    pub endpoint_url: Option<String>,
    /// Topic of the original record (the source topic, not a retry tier).
    pub original_topic: String,
    /// Partition of the original record.
    pub original_partition: i32,
    /// Offset of the original record.
    pub original_offset: i64,
    /// Key of the original record.
    pub original_key: Option<Vec<u8>>,
    /// Value of the original record, byte for byte; only its first bytes when
    /// [`original_payload_truncated`](Self::original_payload_truncated).
    pub original_payload_bytes: Vec<u8>,
    /// Headers of the original record, in order, repeats kept.
    pub original_headers: Vec<DlqHeader>,
    /// Why the delivery was parked.
    pub error_reason: ErrorReason,
    /// Detail of the last error, without secrets (cut to [`MAX_ERROR_MESSAGE_LEN`]).
    pub error_message: String,
    /// HTTP status of the last attempt, `None` without a response.
    pub last_status_code: Option<u16>,
    /// Attempts made (0 when rejected before any attempt).
    pub attempts: u32,
    /// When the first attempt was made, epoch milliseconds.
    pub first_attempt_at_ms: Option<i64>,
    /// When the delivery was parked, epoch milliseconds.
    pub error_timestamp_ms: i64,
    /// Id of the dispatcher instance that parked it.
    pub dispatcher_id: String,
    /// Whether the envelope was cut to fit the DLQ topic's maximum record size (see
    /// [`DlqEnvelope::fit_within`]): the payload holds only its first bytes and, if that was
    /// not enough, header values and the error message were cut too. Such a record cannot be
    /// re-driven byte for byte. `false` in records written with versions 1 and 2.
    pub original_payload_truncated: bool,
    /// Full size in bytes of the original payload, set when it was cut; `None` otherwise.
    pub original_payload_size: Option<u64>,
    /// The tenant of the parked event (the event's `tenant_id`): set on deliveries fanned out
    /// from a tenant event; `None` when the event names none, when the record could not be
    /// parsed, and in records written with versions 1 to 3.
    pub tenant_id: Option<String>,
}

impl DlqEnvelope {
    /// The W3C trace id of the original record's `traceparent` header (the last one, as the
    /// dispatcher passes it on to the endpoint); `None` without a valid one. Written as the
    /// envelope's `trace_id` field.
    pub fn trace_id(&self) -> Option<&str> {
        self.original_headers
            .iter()
            .rev()
            .find(|h| h.key == TRACEPARENT)
            .and_then(|h| h.value.as_deref())
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(crate::trace::trace_id_of)
    }
}

/// One Kafka record header of the original record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DlqHeader {
    /// Header name.
    pub key: String,
    /// Header value, `None` for a header without a value.
    pub value: Option<Vec<u8>>,
}

/// What is wrong with an envelope value or datum, naming the field.
#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    /// The bytes are not an Avro envelope datum.
    #[error("invalid Avro DLQ envelope: {0}")]
    Avro(#[source] apache_avro::Error),
    /// The datum has bytes left over after the envelope.
    #[error("Avro DLQ envelope datum has {0} trailing bytes")]
    TrailingBytes(usize),
    /// The value is not a record.
    #[error("Avro value is not a DlqEnvelope record")]
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
    /// A number is out of range for its field.
    #[error("field `{field}` is {value}, out of range")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// The value found.
        value: i64,
    },
    /// `error_reason` names no known reason.
    #[error("field `error_reason`: {0}")]
    Reason(#[source] UnknownReason),
}

/// The `event_id` of a record that could not be parsed: `<topic>/<partition>/<offset>`
/// (Kafka topic names cannot contain `/`, so it is unambiguous).
pub fn derived_event_id(topic: &str, partition: i32, offset: i64) -> String {
    format!("{topic}/{partition}/{offset}")
}

/// `message` cut to at most [`MAX_ERROR_MESSAGE_LEN`] bytes at a char boundary.
pub fn truncate_message(message: &str) -> &str {
    prefix_within(message, MAX_ERROR_MESSAGE_LEN)
}

/// The longest prefix of `text` of at most `max_len` bytes that ends at a char boundary.
fn prefix_within(text: &str, max_len: usize) -> &str {
    if text.len() <= max_len {
        return text;
    }
    let mut end = max_len;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids() {
        assert_eq!(
            derived_event_id("webhook-events", 3, 42),
            "webhook-events/3/42"
        );
    }

    #[test]
    fn truncation_keeps_char_boundaries() {
        assert_eq!(truncate_message("short"), "short");
        let long = "é".repeat(MAX_ERROR_MESSAGE_LEN);
        let cut = truncate_message(&long);
        assert!(cut.len() <= MAX_ERROR_MESSAGE_LEN);
        assert_eq!(cut.len(), MAX_ERROR_MESSAGE_LEN);
        let odd = format!("a{long}");
        assert_eq!(truncate_message(&odd).len(), MAX_ERROR_MESSAGE_LEN - 1);
    }
}
