//! Building the DLQ envelope of a parked record. Pure: no I/O.

use hookline_core::WebhookEvent;
use hookline_core::envelope::{
    DlqEnvelope, DlqHeader, ENVELOPE_VERSION, ErrorReason, derived_event_id, truncate_message,
};
use hookline_core::headers::{DeliveryMeta, is_delivery_header};
use hookline_core::url_guard::redact_url;

use crate::record::SourceRecord;

/// What went wrong, for the envelope.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The reason code.
    pub reason: ErrorReason,
    /// A human-readable account, never holding secrets.
    pub message: String,
    /// The last HTTP status, when there was an answer.
    pub last_status: Option<u16>,
    /// The URL the delivery was for, once the endpoint was known, redacted (no user info,
    /// no query string): the DLQ and logs never need more, and redrive replays the original
    /// event, which still has its URL.
    pub target_url: Option<String>,
}

impl Failure {
    /// A failure before any answer.
    pub fn new(reason: ErrorReason, message: impl Into<String>) -> Self {
        Failure {
            reason,
            message: message.into(),
            last_status: None,
            target_url: None,
        }
    }

    /// The same failure, with the last HTTP status.
    pub fn with_status(mut self, status: Option<u16>) -> Self {
        self.last_status = status;
        self
    }

    /// The same failure, for a delivery to `url` (kept redacted).
    pub fn at(mut self, url: &str) -> Self {
        self.target_url = Some(redact_url(url));
        self
    }
}

/// The envelope for `record`, which failed as `failure` said after the attempts in `meta`.
/// `event` is the decoded event when the record could be decoded.
pub fn build_envelope(
    record: &SourceRecord,
    meta: &DeliveryMeta,
    event: Option<&WebhookEvent>,
    failure: &Failure,
    now_ms: i64,
    dispatcher_id: &str,
) -> DlqEnvelope {
    let key = record.key.clone();
    DlqEnvelope {
        envelope_version: ENVELOPE_VERSION,
        // A record that could not be decoded has no event id: it is named by its place.
        event_id: event.map(|e| e.event_id.clone()).unwrap_or_else(|| {
            derived_event_id(
                &meta.original_topic,
                meta.original_partition,
                meta.original_offset,
            )
        }),
        event_type: event.map(|e| e.event_type.clone()),
        endpoint_id: event.and_then(|e| e.endpoint_id.clone()).or_else(|| {
            key.as_deref()
                .and_then(|k| std::str::from_utf8(k).ok())
                .map(str::to_owned)
        }),
        // Never the query string or user info: they may hold credentials.
        endpoint_url: failure
            .target_url
            .as_deref()
            .or_else(|| event.and_then(|e| e.endpoint_url.as_deref()))
            .map(redact_url),
        original_topic: meta.original_topic.clone(),
        original_partition: meta.original_partition,
        original_offset: meta.original_offset,
        original_key: key,
        original_payload_bytes: record.value.clone().unwrap_or_default(),
        original_headers: record
            .headers
            .iter()
            .filter(|(name, _)| !is_delivery_header(name))
            .map(|(name, value)| DlqHeader {
                key: name.clone(),
                value: value.clone(),
            })
            .collect(),
        error_reason: failure.reason,
        error_message: truncate_message(&failure.message).to_owned(),
        last_status_code: failure.last_status,
        attempts: meta.attempt,
        first_attempt_at_ms: meta.first_attempt_at_ms,
        error_timestamp_ms: now_ms,
        dispatcher_id: dispatcher_id.to_owned(),
        original_payload_truncated: false,
        original_payload_size: None,
        tenant_id: event.and_then(|e| e.tenant_id.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> SourceRecord {
        SourceRecord {
            topic: "webhook-events.retry.5s".into(),
            partition: 2,
            offset: 40,
            key: Some(b"ep-1".to_vec()),
            value: Some(b"\x00not json".to_vec()),
            headers: vec![
                ("traceparent".to_owned(), Some(b"00-abc".to_vec())),
                ("hookline-attempt".to_owned(), Some(b"3".to_vec())),
            ],
            bad_header_name: None,
        }
    }

    fn meta() -> DeliveryMeta {
        DeliveryMeta {
            attempt: 3,
            due_at_ms: None,
            retry_at_ms: None,
            original_topic: "webhook-events".to_owned(),
            original_partition: 1,
            original_offset: 7,
            first_attempt_at_ms: Some(1_000),
            last_error: None,
        }
    }

    #[test]
    fn keeps_the_original_place_bytes_and_headers() {
        let failure = Failure::new(ErrorReason::RetriesExhausted, "HTTP 503")
            .with_status(Some(503))
            .at("https://user:pw@example.com/hook?token=secret");
        let envelope = build_envelope(&record(), &meta(), None, &failure, 9_000, "d-1");
        assert_eq!(envelope.original_topic, "webhook-events");
        assert_eq!(envelope.original_partition, 1);
        assert_eq!(envelope.original_offset, 7);
        assert_eq!(envelope.original_payload_bytes, b"\x00not json".to_vec());
        assert_eq!(envelope.original_key.as_deref(), Some(&b"ep-1"[..]));
        assert_eq!(
            envelope.endpoint_id.as_deref(),
            Some("ep-1"),
            "taken from the key"
        );
        assert_eq!(envelope.event_id, derived_event_id("webhook-events", 1, 7));
        assert_eq!(envelope.attempts, 3);
        assert_eq!(envelope.last_status_code, Some(503));
        assert_eq!(
            envelope.original_headers.len(),
            1,
            "hookline's own headers are not kept"
        );
        assert_eq!(envelope.original_headers[0].key, "traceparent");
        let url = envelope.endpoint_url.expect("the target URL");
        assert!(url.starts_with("https://example.com/hook"), "{url}");
        assert!(!url.contains("secret") && !url.contains("pw"), "{url}");
        assert_eq!(envelope.tenant_id, None, "no event, no tenant");
    }

    #[test]
    fn keeps_the_tenant_of_a_fanned_out_delivery() {
        let event = WebhookEvent {
            event_id: "evt-1".to_owned(),
            event_type: "invoice.paid".to_owned(),
            endpoint_id: Some("ep-1".to_owned()),
            tenant_id: Some("acme".to_owned()),
            channels: vec!["eu".to_owned()],
            endpoint_url: None,
            payload: b"{}".to_vec(),
            content_type: "application/json".to_owned(),
            headers: std::collections::BTreeMap::new(),
            created_at_ms: 1,
            expires_at_ms: None,
        };
        let failure = Failure::new(ErrorReason::NonRetryableStatus, "HTTP 400");
        let envelope = build_envelope(&record(), &meta(), Some(&event), &failure, 9_000, "d-1");
        assert_eq!(envelope.tenant_id.as_deref(), Some("acme"));
        assert_eq!(envelope.endpoint_id.as_deref(), Some("ep-1"));
        assert_eq!(envelope.event_id, "evt-1");
        let direct = WebhookEvent {
            tenant_id: None,
            ..event
        };
        let envelope = build_envelope(&record(), &meta(), Some(&direct), &failure, 9_000, "d-1");
        assert_eq!(envelope.tenant_id, None);
    }
}
