//! Getting an event ready to send, without I/O: defaults filled in, validated.

use hookline_core::WebhookEvent;

use super::PublishError;

/// A copy of `event` with an empty `event_id` replaced by `new_id()` and a zero
/// `created_at_ms` by `now_ms`, then validated ([`PublishError::Invalid`] if not). An
/// `expires_at_ms` at or before `now_ms` is refused ([`PublishError::Expired`]): it would
/// only be parked.
pub(crate) fn prepare(
    event: &WebhookEvent,
    max_payload_bytes: usize,
    now_ms: i64,
    new_id: impl FnOnce() -> String,
) -> Result<WebhookEvent, PublishError> {
    let mut event = event.clone();
    if event.event_id.is_empty() {
        event.event_id = new_id();
    }
    if event.created_at_ms == 0 {
        event.created_at_ms = now_ms;
    }
    match event.validate(max_payload_bytes) {
        Ok(()) if event.expired_at(now_ms) => Err(PublishError::Expired {
            event_id: event.event_id,
            expires_at_ms: event.expires_at_ms.unwrap_or_default(),
            now_ms,
        }),
        Ok(()) => Ok(event),
        Err(source) => Err(PublishError::Invalid {
            event_id: event.event_id,
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use hookline_core::EventError;

    use super::*;

    fn event(event_id: &str, created_at_ms: i64) -> WebhookEvent {
        WebhookEvent {
            event_id: event_id.into(),
            event_type: "invoice.paid".into(),
            endpoint_id: Some("ep_1".into()),
            tenant_id: None,
            channels: Vec::new(),
            endpoint_url: None,
            payload: br#"{"amount":42}"#.to_vec(),
            content_type: "application/json".into(),
            headers: BTreeMap::new(),
            created_at_ms,
            expires_at_ms: None,
        }
    }

    #[test]
    fn fills_in_id_and_time_when_empty() {
        let ready =
            prepare(&event("", 0), 1024, 1_700_000_000_000, || "new".into()).expect("valid");
        assert_eq!(ready.event_id, "new");
        assert_eq!(ready.created_at_ms, 1_700_000_000_000);
    }

    #[test]
    fn keeps_what_is_given() {
        let given = event("evt_1", 42);
        let ready = prepare(&given, 1024, 1_700_000_000_000, || unreachable!()).expect("valid");
        assert_eq!(ready, given);
    }

    #[test]
    fn refuses_a_deadline_that_has_passed() {
        let now = 1_700_000_000_000;
        let mut late = event("evt_1", 42);
        late.expires_at_ms = Some(now);
        let error = prepare(&late, 1024, now, || unreachable!()).expect_err("expired");
        assert!(matches!(
            error,
            PublishError::Expired { ref event_id, expires_at_ms, now_ms }
                if event_id == "evt_1" && expires_at_ms == now && now_ms == now
        ));
        assert!(error.is_invalid_event());
        assert!(error.to_string().contains("expires_at"), "{error}");
        late.expires_at_ms = Some(now + 1);
        let ready = prepare(&late, 1024, now, || unreachable!()).expect("in time");
        assert_eq!(ready.expires_at_ms, Some(now + 1));
    }

    #[test]
    fn refuses_invalid_events() {
        let mut bad = event("evt_1", 42);
        bad.event_type.clear();
        let error = prepare(&bad, 1024, 0, || "x".into()).expect_err("invalid");
        assert!(matches!(
            error,
            PublishError::Invalid { ref event_id, source: EventError::Empty { field: "event_type" } }
                if event_id == "evt_1"
        ));
        let error = prepare(&event("evt_1", 42), 4, 0, || "x".into()).expect_err("too big");
        assert!(matches!(
            error,
            PublishError::Invalid {
                source: EventError::PayloadTooLarge { size: 13, max: 4 },
                ..
            }
        ));
    }
}
