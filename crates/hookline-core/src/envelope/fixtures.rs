//! Envelopes for unit tests.

use super::{DlqEnvelope, DlqHeader, ENVELOPE_VERSION, ErrorReason, derived_event_id};

/// A valid `traceparent` header value.
pub const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
/// The trace id of [`TRACEPARENT`].
pub const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";

/// An envelope with every optional field set, and repeated headers.
pub fn full() -> DlqEnvelope {
    DlqEnvelope {
        envelope_version: ENVELOPE_VERSION,
        event_id: "evt_1".into(),
        event_type: Some("invoice.paid".into()),
        endpoint_id: Some("ep_1".into()),
        endpoint_url: Some("https://example.com/hook".into()),
        original_topic: "webhook-events".into(),
        original_partition: 2,
        original_offset: 12_345,
        original_key: Some(b"ep_1".to_vec()),
        original_payload_bytes: vec![0, 0, 0, 0, 1, 2, 3],
        original_headers: vec![
            DlqHeader {
                key: "traceparent".into(),
                value: Some(TRACEPARENT.as_bytes().to_vec()),
            },
            DlqHeader {
                key: "x".into(),
                value: None,
            },
            DlqHeader {
                key: "x".into(),
                value: Some(b"again".to_vec()),
            },
        ],
        error_reason: ErrorReason::RetriesExhausted,
        error_message: "HTTP 503".into(),
        last_status_code: Some(503),
        attempts: 8,
        first_attempt_at_ms: Some(1_700_000_000_000),
        error_timestamp_ms: 1_700_000_100_000,
        dispatcher_id: "dispatcher-0".into(),
        original_payload_truncated: false,
        original_payload_size: None,
        tenant_id: Some("acme".into()),
    }
}

/// The envelope of a record that could not be parsed: no optional field set.
pub fn minimal() -> DlqEnvelope {
    DlqEnvelope {
        envelope_version: ENVELOPE_VERSION,
        event_id: derived_event_id("webhook-events", 0, 7),
        event_type: None,
        endpoint_id: None,
        endpoint_url: None,
        original_topic: "webhook-events".into(),
        original_partition: 0,
        original_offset: 7,
        original_key: None,
        original_payload_bytes: b"not json".to_vec(),
        original_headers: vec![],
        error_reason: ErrorReason::MalformedEvent,
        error_message: "invalid JSON event".into(),
        last_status_code: None,
        attempts: 0,
        first_attempt_at_ms: None,
        error_timestamp_ms: 1,
        dispatcher_id: "d".into(),
        original_payload_truncated: false,
        original_payload_size: None,
        tenant_id: None,
    }
}
