//! Operational webhooks on the real stack: hookline's own signed notices about parked
//! deliveries, disabled and enabled endpoints and circuits, sent to an operator endpoint
//! through hookline's own pipeline (retried like any delivery), de-duplicated and
//! rate-limited, and never about the operator endpoint's own trouble.

use std::time::Instant;

use hookline_core::WebhookEvent;
use hookline_core::signing::{SigningSecret, verify};
use hookline_dispatcher::DispatcherConfig;
use hookline_testkit::{Received, Reply, wait_until};
use serde_json::{Value, json};

use crate::harness::{DEADLINE, Harness, SECRET, event};

/// A configuration sending notices to `ep-ops`.
fn with_operator(h: &Harness, max_per_minute: u32, min_interval_ms: u64) -> DispatcherConfig {
    let mut config = h.config();
    config.operator_webhooks.endpoint_id = Some("ep-ops".to_owned());
    config.operator_webhooks.max_per_minute = max_per_minute;
    config.operator_webhooks.min_interval_ms = min_interval_ms;
    config
}

/// A received notice's body, after checking its Standard Webhooks signature (v1) with
/// [`SECRET`] as a receiver would.
fn verified(request: &Received) -> Value {
    let secret = SigningSecret::parse(SECRET).expect("secret");
    let id = request.header("webhook-id").expect("webhook-id");
    let timestamp: i64 = request
        .header("webhook-timestamp")
        .and_then(|t| t.parse().ok())
        .expect("webhook-timestamp");
    let signature = request.header("webhook-signature").expect("signature");
    verify(&[secret], id, timestamp, &request.body, signature).expect("a valid signature");
    assert!(id.starts_with("op_"), "{id}");
    serde_json::from_slice(&request.body).expect("a JSON body")
}

/// The verified bodies `ops` answered 2xx to.
fn notices(h: &Harness) -> Vec<Value> {
    h.receiver
        .received("ops")
        .iter()
        .filter(|r| r.reply == Reply::Status(200))
        .map(verified)
        .collect()
}

/// Waits for a notice of `kind` about `endpoint`.
async fn notice(h: &Harness, kind: &str, endpoint: &str) -> Value {
    wait_until(DEADLINE, &format!("{kind} about {endpoint}"), || async {
        notices(h)
            .into_iter()
            .find(|n| n["type"] == kind && n["data"]["endpoint_id"] == endpoint)
    })
    .await
}

fn outcome(h: &Harness, kind: &str, outcome: &str) -> u64 {
    h.metric(&format!(
        "webhook_operator_notices_total{{type=\"{kind}\",outcome=\"{outcome}\"}}"
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parked_disabled_and_enabled_notices_are_signed_and_fifty_parks_make_a_handful() {
    let mut h = Harness::new("op-parked").await;
    let ops = h.receiver.script("ops", |_| Reply::Status(200));
    let bad = h.receiver.script("bad", |_| Reply::Status(400));
    let gone = h.receiver.script("gone", |_| Reply::Status(410));
    h.put_endpoint("ep-ops", json!({ "url": ops })).await;
    h.put_endpoint("ep-bad", json!({ "url": bad })).await;
    h.put_endpoint("ep-gone", json!({ "url": gone })).await;
    // A bucket of 7 a minute (shared by every type), and windows of 1 ms: the bucket alone
    // holds the 50 back.
    h.start(with_operator(&h, 7, 1)).await;
    let started = Instant::now();

    h.publish_json(&event("ep-gone", 0)).await;
    let disabled = notice(&h, "endpoint.disabled", "ep-gone").await;
    assert_eq!(disabled["data"]["reason"], "gone: HTTP 410");
    assert!(disabled["data"]["disabled_at"].is_string(), "{disabled}");
    let parked = notice(&h, "delivery.parked", "ep-gone").await;
    assert_eq!(parked["data"]["reason"], "non_retryable_status");
    assert_eq!(parked["data"]["last_status"], 410);
    // `hookline endpoints enable` writes the config enabled: every replica's table sees it.
    h.put_endpoint("ep-gone", json!({ "url": gone })).await;
    let enabled = notice(&h, "endpoint.enabled", "ep-gone").await;
    assert_eq!(enabled["data"]["disabled_reason"], "gone: HTTP 410");
    assert_eq!(
        enabled["data"]["disabled_at"],
        disabled["data"]["disabled_at"]
    );
    // `hookline endpoints disable` writes the config disabled: told as well, with its reason.
    h.put_endpoint(
        "ep-bad",
        json!({ "url": bad, "enabled": false, "disabled_reason": "manual: moving",
                "disabled_at_ms": 1_764_583_200_000_i64 }),
    )
    .await;
    let manual = notice(&h, "endpoint.disabled", "ep-bad").await;
    assert_eq!(manual["data"]["reason"], "manual: moving");
    assert_eq!(manual["data"]["disabled_at"], "2025-12-01T10:00:00Z");
    h.put_endpoint("ep-bad", json!({ "url": bad })).await;
    notice(&h, "endpoint.enabled", "ep-bad").await;

    for n in 1..=50 {
        let event = WebhookEvent {
            tenant_id: Some("acme".to_owned()),
            ..event("ep-bad", n)
        };
        h.publish_json(&event).await;
    }
    h.wait_for_metric("webhook_dlq_total{reason=\"non_retryable_status\"}", 51)
        .await;
    let parked = notice(&h, "delivery.parked", "ep-bad").await;
    let data = &parked["data"];
    assert_eq!(data["reason"], "non_retryable_status");
    assert_eq!(data["tenant_id"], "acme");
    assert_eq!(data["dlq_topic"], h.topics.dlq.as_str());
    assert_eq!(data["attempts"], 1);
    assert_eq!(data["last_status"], 400);
    assert!(
        data["offset"].is_i64() && data["partition"].is_i64(),
        "{data}"
    );
    let text = parked.to_string();
    assert!(
        !text.contains("127.0.0.1") && !text.contains("invoice"),
        "no URL, no payload: {text}"
    );

    // Every one of the 51 parks was sent, rate-limited or folded into one sent already.
    let kind = "delivery.parked";
    wait_until(DEADLINE, "every park counted", || async {
        let counted: u64 = ["sent", "rate_limited", "deduplicated", "dropped"]
            .iter()
            .map(|o| outcome(&h, kind, o))
            .sum();
        (counted >= 51).then_some(())
    })
    .await;
    let sent = outcome(&h, kind, "sent");
    let refills = started.elapsed().as_secs() * 7 / 60;
    assert!(
        (1..=3 + refills).contains(&sent),
        "at most the bucket (7, four of them the disables and the enables) and refills: {sent}\n{}",
        h.metrics()
    );
    let held = outcome(&h, kind, "rate_limited") + outcome(&h, kind, "deduplicated");
    assert_eq!(held + sent, 51, "{}", h.metrics());
    assert!(outcome(&h, kind, "rate_limited") >= 1, "{}", h.metrics());
    assert_eq!(outcome(&h, kind, "dropped"), 0);
    wait_until(DEADLINE, "the sent notices delivered", || async {
        let about_parks = notices(&h).iter().filter(|n| n["type"] == kind).count();
        (about_parks as u64 >= sent).then_some(())
    })
    .await;
    assert_eq!(
        notices(&h).iter().filter(|n| n["type"] == kind).count() as u64,
        sent
    );

    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_circuit_that_opens_and_closes_again_is_told_once_each() {
    let mut h = Harness::new("op-circuit").await;
    let ops = h.receiver.script("ops", |_| Reply::Status(200));
    // Down for its first 12 requests, then up again.
    let flaky = h
        .receiver
        .script("flaky", |n| Reply::Status(if n < 12 { 503 } else { 200 }));
    h.put_endpoint("ep-ops", json!({ "url": ops })).await;
    h.put_endpoint("ep-flaky", json!({ "url": flaky })).await;
    let mut config = with_operator(&h, 30, 60_000);
    config.breaker.minimum_requests = 10;
    config.breaker.window_ms = 10_000;
    config.breaker.open_ms = 1_000;
    config.retry.max_attempts = 20;
    config.concurrency.per_endpoint = 4;
    h.start(config).await;

    for n in 0..30 {
        h.publish_json(&event("ep-flaky", n)).await;
    }
    let opened = notice(&h, "endpoint.circuit_opened", "ep-flaky").await;
    let failures = opened["data"]["failures"].as_u64().expect("failures");
    let requests = opened["data"]["requests"].as_u64().expect("requests");
    assert!(failures >= 8 && requests >= 10, "{opened}");
    let closed = notice(&h, "endpoint.circuit_closed", "ep-flaky").await;
    assert_eq!(closed["data"]["opened_at"], opened["data"]["opened_at"]);
    h.wait_for_metric("webhook_delivery_total{status=\"succeeded\"}", 30)
        .await;
    let about_circuits = notices(&h)
        .iter()
        .filter(|n| {
            n["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("endpoint.circuit"))
        })
        .count();
    assert_eq!(about_circuits, 2, "{:?}", notices(&h));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_operator_endpoint_gets_its_notice_through_a_retry_tier() {
    let mut h = Harness::new("op-retry").await;
    let ops = h
        .receiver
        .script("ops", |n| Reply::Status(if n < 3 { 503 } else { 200 }));
    let bad = h.receiver.script("bad", |_| Reply::Status(400));
    h.put_endpoint("ep-ops", json!({ "url": ops })).await;
    h.put_endpoint("ep-bad", json!({ "url": bad })).await;
    let mut config = with_operator(&h, 30, 60_000);
    config.retry.max_attempts = 6;
    h.start(config).await;

    h.publish_json(&event("ep-bad", 1)).await;
    let parked = notice(&h, "delivery.parked", "ep-bad").await;
    assert_eq!(parked["data"]["reason"], "non_retryable_status");
    let requests = h.receiver.received("ops");
    assert_eq!(requests.len(), 4, "three 503s, then the 200");
    let ids: Vec<&str> = requests
        .iter()
        .filter_map(|r| r.header("webhook-id"))
        .collect();
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "one webhook-id: {ids:?}"
    );
    assert!(
        h.metric_sum("webhook_retries_total") >= 3,
        "{}",
        h.metrics()
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_operator_endpoints_own_trouble_sends_it_nothing_more() {
    let mut h = Harness::new("op-loop").await;
    let ops = h.receiver.script("ops", |_| Reply::Status(400));
    let bad = h.receiver.script("bad", |_| Reply::Status(400));
    h.put_endpoint("ep-ops", json!({ "url": ops })).await;
    h.put_endpoint("ep-bad", json!({ "url": bad })).await;
    // No dedup window to speak of, and room in the bucket: only the loop guard holds.
    h.start(with_operator(&h, 1_000, 1)).await;

    h.publish_json(&event("ep-bad", 1)).await;
    // The customer's park, then the notice's own park (the operator answers 400).
    let dlq = h.dlq(2).await;
    let mut parked_for: Vec<Option<String>> =
        dlq.iter().map(|(e, _)| e.endpoint_id.clone()).collect();
    parked_for.sort();
    assert_eq!(
        parked_for,
        [Some("ep-bad".to_owned()), Some("ep-ops".to_owned())]
    );
    h.wait_for_metric(
        "webhook_operator_notices_total{type=\"delivery.parked\",outcome=\"about_operator\"}",
        1,
    )
    .await;
    // Anything more would have been sent by now: the guard counted it instead.
    h.publish_json(&event("ep-bad", 2)).await;
    h.wait_for_metric("webhook_dlq_total{reason=\"non_retryable_status\"}", 4)
        .await;
    h.wait_for_metric(
        "webhook_operator_notices_total{type=\"delivery.parked\",outcome=\"about_operator\"}",
        2,
    )
    .await;
    assert_eq!(h.receiver.count("ops"), 2, "one notice per customer park");
    h.stop().await;
}
