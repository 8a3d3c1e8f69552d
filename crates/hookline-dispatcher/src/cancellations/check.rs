//! The checks before an attempt (deadline, cancellation) and after a failed one (a retry
//! that would fall due past the deadline), each a DLQ failure when it stops the delivery.

use hookline_core::WebhookEvent;
use hookline_core::envelope::ErrorReason;

use super::set::{CancellationSet, Held};
use crate::envelope::Failure;

/// A time in epoch milliseconds as RFC 3339 (UTC), or the number when out of range.
fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| format!("{ms} ms"), |t| t.to_string())
}

/// Why attempt `attempt_no` of the delivery of `event` to `endpoint_id` must not be made
/// at `now_ms`: its deadline has passed (`expired`), or it is cancelled (`cancelled`).
pub(crate) fn before_attempt(
    cancellations: &CancellationSet,
    event: &WebhookEvent,
    endpoint_id: &str,
    attempt_no: u32,
    now_ms: i64,
) -> Option<Failure> {
    // Written only for a failure: this runs twice before every attempt.
    let not_made = || format!("attempt {attempt_no} not made");
    if let Some(failure) = expired(event, now_ms, not_made) {
        return Some(failure);
    }
    let held = cancellations.lookup(&event.event_id, Some(endpoint_id))?;
    let scope = if held.whole_event {
        "the event was cancelled".to_owned()
    } else {
        format!("its delivery to {endpoint_id} was cancelled")
    };
    Some(cancelled(&held, &scope, &not_made()))
}

/// Why the tenant event `event` must not be fanned out at `now_ms`: its deadline has
/// passed, or the whole event is cancelled. It is then parked once, as the tenant event,
/// rather than as one DLQ record per subscribed endpoint.
pub(crate) fn before_fanout(
    cancellations: &CancellationSet,
    event: &WebhookEvent,
    now_ms: i64,
) -> Option<Failure> {
    let not_made = "not fanned out";
    if let Some(failure) = expired(event, now_ms, || not_made.to_owned()) {
        return Some(failure);
    }
    let held = cancellations.lookup(&event.event_id, None)?;
    Some(cancelled(&held, "the event was cancelled", not_made))
}

fn expired(
    event: &WebhookEvent,
    now_ms: i64,
    not_made: impl FnOnce() -> String,
) -> Option<Failure> {
    let deadline = event.expires_at_ms.filter(|_| event.expired_at(now_ms))?;
    let message = format!("expires_at {} passed; {}", time(deadline), not_made());
    Some(Failure::new(ErrorReason::Expired, message))
}

fn cancelled(held: &Held, scope: &str, not_made: &str) -> Failure {
    let mut message = format!("{scope} at {}", time(held.cancelled_at_ms));
    if let Some(by) = &held.cancelled_by {
        message.push_str(&format!(" by {by}"));
    }
    if let Some(reason) = &held.reason {
        message.push_str(&format!(" ({reason})"));
    }
    message.push_str(&format!("; {not_made}"));
    Failure::new(ErrorReason::Cancelled, message)
}

/// The failure of a delivery whose next attempt, due at `due_at_ms`, would come at or
/// after its deadline: parked at once as `expired` rather than left to wait in a tier.
pub(crate) fn retry_past_deadline(
    event: &WebhookEvent,
    due_at_ms: i64,
    attempts_made: u32,
    last_error: &str,
) -> Option<Failure> {
    let deadline = event
        .expires_at_ms
        .filter(|_| event.expired_at(due_at_ms))?;
    let message = format!(
        "after {attempts_made} attempts: the next, due at {}, would be past expires_at {}; \
         last error: {last_error}",
        time(due_at_ms),
        time(deadline)
    );
    Some(Failure::new(ErrorReason::Expired, message))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use hookline_core::cancellation::Cancellation;

    use super::*;

    const NOW: i64 = 1_764_583_200_000;

    fn event(expires_at_ms: Option<i64>) -> WebhookEvent {
        WebhookEvent {
            event_id: "evt_1".into(),
            event_type: "order.paid".into(),
            endpoint_id: Some("ep-a".into()),
            tenant_id: None,
            channels: Vec::new(),
            endpoint_url: None,
            payload: b"{}".to_vec(),
            content_type: "application/json".into(),
            headers: BTreeMap::new(),
            created_at_ms: NOW - 1_000,
            expires_at_ms,
        }
    }

    fn cancel(set: &CancellationSet, endpoint: Option<&str>) {
        let c = Cancellation {
            event_id: "evt_1".into(),
            endpoint_id: endpoint.map(str::to_owned),
            reason: Some("order refunded".into()),
            cancelled_at_ms: NOW,
            cancelled_by: Some("alice".into()),
        };
        set.apply(Some(c.key().as_bytes()), Some(&c.to_json()), NOW);
    }

    fn set() -> CancellationSet {
        CancellationSet::new(Duration::from_secs(3600), 100)
    }

    #[test]
    fn the_deadline_stops_attempts_from_its_millisecond_on() {
        let set = set();
        let e = event(Some(NOW));
        assert!(before_attempt(&set, &e, "ep-a", 1, NOW - 1).is_none());
        let failure = before_attempt(&set, &e, "ep-a", 2, NOW).expect("expired");
        assert_eq!(failure.reason, ErrorReason::Expired);
        assert!(
            failure.message.contains("2025-12-01T10:00:00Z")
                && failure.message.contains("attempt 2"),
            "{}",
            failure.message
        );
        assert!(before_attempt(&set, &event(None), "ep-a", 1, i64::MAX).is_none());
    }

    #[test]
    fn a_cancellation_stops_the_event_or_one_delivery() {
        let set = set();
        let e = event(None);
        assert!(before_attempt(&set, &e, "ep-a", 1, NOW).is_none());
        cancel(&set, Some("ep-a"));
        let failure = before_attempt(&set, &e, "ep-a", 1, NOW).expect("cancelled");
        assert_eq!(failure.reason, ErrorReason::Cancelled);
        assert!(
            failure.message.contains("by alice (order refunded)"),
            "{}",
            failure.message
        );
        assert!(before_attempt(&set, &e, "ep-b", 1, NOW).is_none());
        cancel(&set, None);
        assert!(before_attempt(&set, &e, "ep-b", 1, NOW).is_some());
    }

    #[test]
    fn a_retry_due_at_or_past_the_deadline_is_parked_at_once() {
        let e = event(Some(NOW));
        assert!(retry_past_deadline(&e, NOW - 1, 1, "HTTP 503").is_none());
        let failure = retry_past_deadline(&e, NOW, 2, "HTTP 503").expect("expired");
        assert_eq!(failure.reason, ErrorReason::Expired);
        assert!(
            failure.message.starts_with("after 2 attempts"),
            "{}",
            failure.message
        );
        assert!(retry_past_deadline(&event(None), i64::MAX, 2, "x").is_none());
    }
}
