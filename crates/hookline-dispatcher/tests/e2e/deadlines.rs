//! Deadlines and cancellations on the real stack: an event's `expires_at` stops its retries
//! and parks it `expired`; an event already expired is parked without an attempt; a
//! cancellation written while a record waits in a retry tier parks it `cancelled` when it
//! comes due; a cancellation naming one endpoint stops only that delivery of a fanned-out
//! tenant event; a tenant event expired or cancelled whole is parked once, not fanned out.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hookline_core::WebhookEvent;
use hookline_core::attempt_log::{AttemptKind, AttemptRecord};
use hookline_core::cancellation::Cancellation;
use hookline_core::envelope::ErrorReason;
use hookline_core::schema::webhook_attempt_schema;
use hookline_testkit::{Reply, read_all, unique_name, wait_until};
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;

use crate::harness::{DEADLINE, Harness, event};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Delivers one event to a healthy endpoint, so the dispatcher is known to consume (its
/// partitions assigned) before a timed test starts.
async fn warm_up(h: &Harness) {
    let url = h.receiver.script("warm", |_| Reply::Status(204));
    h.put_endpoint("ep-warm", serde_json::json!({ "url": url }))
        .await;
    h.publish_json(&event("ep-warm", 0)).await;
    h.wait_for_requests("warm", 1).await;
}

/// Writes a cancellation as `hookline events cancel` does.
async fn cancel(h: &Harness, event_id: &str, endpoint: Option<&str>) {
    let cancellation = Cancellation {
        event_id: event_id.to_owned(),
        endpoint_id: endpoint.map(str::to_owned),
        reason: Some("order refunded".to_owned()),
        cancelled_at_ms: now_ms(),
        cancelled_by: Some("e2e".to_owned()),
    };
    let (key, value) = (cancellation.key(), cancellation.to_json());
    h.producer
        .send(
            FutureRecord::to(&h.topics.cancellations)
                .key(&key)
                .payload(&value),
            DEADLINE,
        )
        .await
        .expect("cancellation written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_event_is_retried_until_its_deadline_then_parked_expired() {
    let mut h = Harness::new("dl-expire").await;
    let url = h.receiver.script("down", |_| Reply::Status(503));
    h.put_endpoint("ep-down", serde_json::json!({ "url": url }))
        .await;
    let mut config = h.config();
    config.retry.max_attempts = 50;
    h.start(config).await;
    warm_up(&h).await;

    let (start, start_ms) = (Instant::now(), now_ms());
    let ttl = Duration::from_millis(1_500);
    let deadline = start + ttl;
    let e = WebhookEvent {
        expires_at_ms: Some(start_ms + 1_500),
        ..event("ep-down", 1)
    };
    h.publish_json(&e).await;
    let dlq = h.dlq(1).await;
    let (envelope, _) = &dlq[0];
    assert_eq!(envelope.error_reason, ErrorReason::Expired);
    assert_eq!(envelope.event_id, e.event_id);
    assert!(
        envelope.error_message.contains("expires_at"),
        "{}",
        envelope.error_message
    );
    let attempts = h.receiver.received("down");
    assert!(attempts.len() >= 2, "retried: {} attempts", attempts.len());
    assert_eq!(envelope.attempts as usize, attempts.len());
    // Parked right after an attempt (its retry would fall due too late: 503) or when the
    // retry came due after the deadline (no attempt: no status).
    assert!(matches!(envelope.last_status_code, None | Some(503)));
    for attempt in &attempts {
        assert!(attempt.at < deadline, "an attempt after the deadline");
    }
    assert_eq!(h.metric("webhook_dlq_total{reason=\"expired\"}"), 1);
    h.stop().await;
    assert_eq!(
        h.receiver.count("down"),
        attempts.len(),
        "none after the park"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_event_already_expired_is_parked_without_an_attempt() {
    let mut h = Harness::new("dl-late").await;
    let url = h.receiver.script("late", |_| Reply::Status(204));
    h.put_endpoint("ep-late", serde_json::json!({ "url": url }))
        .await;
    h.start(h.config()).await;

    let past = Some(now_ms() - 1_000);
    let json = WebhookEvent {
        expires_at_ms: past,
        ..event("ep-late", 1)
    };
    // Avro of the v3 schema, through the registry, as the publisher writes it.
    let avro = WebhookEvent {
        expires_at_ms: past,
        ..event("ep-late", 2)
    };
    h.publish_json(&json).await;
    h.publish_avro(&avro).await;
    let dlq = h.dlq(2).await;
    for (envelope, _) in &dlq {
        assert_eq!(envelope.error_reason, ErrorReason::Expired);
        assert_eq!(envelope.attempts, 0);
        assert_eq!(envelope.last_status_code, None);
    }
    let mut ids: Vec<&str> = dlq.iter().map(|(e, _)| e.event_id.as_str()).collect();
    ids.sort_unstable();
    let mut expected = [json.event_id.as_str(), avro.event_id.as_str()];
    expected.sort_unstable();
    assert_eq!(ids, expected);
    assert_eq!(h.receiver.count("late"), 0);
    assert_eq!(h.metric("webhook_dlq_total{reason=\"expired\"}"), 2);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancellation_parks_the_record_waiting_in_a_tier() {
    let mut h = Harness::with_tiers("dl-cancel", &["200ms", "2s"]).await;
    let url = h.receiver.script("refunded", |_| Reply::Status(503));
    h.put_endpoint("ep-orders", serde_json::json!({ "url": url }))
        .await;
    let mut config = h.config();
    config.retry.base_ms = 2_000;
    config.retry.cap_ms = 2_000;
    config.retry.max_attempts = 5;
    h.start(config).await;

    let e = event("ep-orders", 1);
    h.publish_json(&e).await;
    h.wait_for_requests("refunded", 1).await;
    // The record now waits about 2 s in the 2s tier.
    cancel(&h, &e.event_id, None).await;
    let cancelled_at = Instant::now();

    let dlq = h.dlq(1).await;
    let (envelope, _) = &dlq[0];
    assert_eq!(envelope.error_reason, ErrorReason::Cancelled);
    assert_eq!(envelope.attempts, 1, "only the attempt before the cancel");
    assert!(
        envelope.error_message.contains("by e2e (order refunded)"),
        "{}",
        envelope.error_message
    );
    assert!(
        h.receiver
            .received("refunded")
            .iter()
            .all(|r| r.at < cancelled_at)
    );
    assert_eq!(h.metric("webhook_dlq_total{reason=\"cancelled\"}"), 1);
    // The attempt log has the park, with its reason: attempt, retry, park.
    let logged = read_all(&h.kafka, &h.topics.attempts, 3, DEADLINE).await;
    let parks: Vec<AttemptRecord> = logged
        .iter()
        .filter_map(|m| {
            let (_, datum) = AttemptRecord::split_framed(m.payload()?).ok()?;
            AttemptRecord::from_avro_datum(datum, webhook_attempt_schema()).ok()
        })
        .filter(|r| r.kind == AttemptKind::Parked)
        .collect();
    assert_eq!(parks.len(), 1);
    assert_eq!(parks[0].reason.as_deref(), Some("cancelled"));
    assert_eq!(parks[0].event_id, e.event_id);
    h.stop().await;
    assert_eq!(
        h.receiver.count("refunded"),
        1,
        "no attempt after the cancel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelling_one_endpoint_stops_only_that_delivery_of_a_tenant_event() {
    let mut h = Harness::with_tiers("dl-fanout", &["200ms", "2s"]).await;
    let mut endpoints = Vec::new();
    for name in ["fan-a", "fan-b", "fan-c"] {
        // The first attempt fails, the retry succeeds.
        let url = h.receiver.script(name, |n| {
            if n == 0 {
                Reply::Status(503)
            } else {
                Reply::Status(204)
            }
        });
        endpoints.push((
            name.to_owned(),
            serde_json::json!({ "url": url, "tenant": "shop", "event_types": ["order.*"] }),
        ));
    }
    h.put_endpoints(endpoints).await;
    let mut config = h.fanout_config();
    config.retry.base_ms = 2_000;
    config.retry.cap_ms = 2_000;
    h.start(config).await;

    let tenant_event = WebhookEvent {
        event_id: format!("evt-{}", unique_name("order")),
        event_type: "order.paid".to_owned(),
        endpoint_id: None,
        tenant_id: Some("shop".to_owned()),
        channels: Vec::new(),
        endpoint_url: None,
        payload: br#"{"order":7}"#.to_vec(),
        content_type: "application/json".to_owned(),
        headers: BTreeMap::new(),
        created_at_ms: 0,
        expires_at_ms: None,
    };
    h.publish_tenant_event(&tenant_event).await;
    for name in ["fan-a", "fan-b", "fan-c"] {
        h.wait_for_requests(name, 1).await;
    }
    cancel(&h, &tenant_event.event_id, Some("fan-b")).await;

    let dlq = h.dlq(1).await;
    let (envelope, _) = &dlq[0];
    assert_eq!(envelope.error_reason, ErrorReason::Cancelled);
    assert_eq!(envelope.endpoint_id.as_deref(), Some("fan-b"));
    assert_eq!(envelope.tenant_id.as_deref(), Some("shop"));
    wait_until(DEADLINE, "fan-a and fan-c delivered", || async {
        (h.receiver.count("fan-a") == 2 && h.receiver.count("fan-c") == 2).then_some(())
    })
    .await;
    h.wait_for_metric("webhook_delivery_total{status=\"succeeded\"}", 2)
        .await;
    h.stop().await;
    assert_eq!(
        h.receiver.count("fan-b"),
        1,
        "the cancelled delivery is not retried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tenant_event_expired_or_cancelled_whole_is_parked_once_not_fanned_out() {
    let mut h = Harness::new("dl-fan-stop").await;
    let mut endpoints = Vec::new();
    for name in ["stop-a", "stop-b", "stop-c"] {
        let url = h.receiver.script(name, |_| Reply::Status(204));
        endpoints.push((
            name.to_owned(),
            serde_json::json!({ "url": url, "tenant": "shop", "event_types": ["order.*"] }),
        ));
    }
    h.put_endpoints(endpoints).await;
    let tenant_event = |name: &str, expires_at_ms: Option<i64>| WebhookEvent {
        event_id: format!("evt-{}", unique_name(name)),
        event_type: "order.paid".to_owned(),
        endpoint_id: None,
        tenant_id: Some("shop".to_owned()),
        channels: Vec::new(),
        endpoint_url: None,
        payload: br#"{"order":7}"#.to_vec(),
        content_type: "application/json".to_owned(),
        headers: BTreeMap::new(),
        created_at_ms: 0,
        expires_at_ms,
    };
    let expired = tenant_event("expired", Some(now_ms() - 1_000));
    let refunded = tenant_event("refunded", None);
    let paid = tenant_event("paid", None);
    // Cancelled before the dispatcher starts: it reads the whole topic first.
    cancel(&h, &refunded.event_id, None).await;
    h.start(h.fanout_config()).await;

    for event in [&expired, &refunded, &paid] {
        h.publish_tenant_event(event).await;
    }
    for name in ["stop-a", "stop-b", "stop-c"] {
        h.wait_for_requests(name, 1).await;
    }
    let dlq = h.dlq(2).await;
    assert_eq!(dlq.len(), 2, "one DLQ record per stopped tenant event");
    for (envelope, _) in &dlq {
        assert_eq!(envelope.tenant_id.as_deref(), Some("shop"));
        // The tenant event (keyed by its tenant on the fan-out topic), not a delivery.
        assert!(
            !matches!(
                envelope.endpoint_id.as_deref(),
                Some("stop-a" | "stop-b" | "stop-c")
            ),
            "{:?}",
            envelope.endpoint_id
        );
        let expected = if envelope.event_id == expired.event_id {
            ErrorReason::Expired
        } else {
            assert_eq!(envelope.event_id, refunded.event_id);
            ErrorReason::Cancelled
        };
        assert_eq!(envelope.error_reason, expected);
    }
    h.stop().await;
    for name in ["stop-a", "stop-b", "stop-c"] {
        assert_eq!(h.receiver.count(name), 1, "{name} got only the paid event");
    }
}
