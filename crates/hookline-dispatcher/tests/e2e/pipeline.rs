//! End-to-end tests of the delivery pipeline against the real local stack (broker and
//! registry from `deploy/local/stack up`) and a real HTTP receiver on 127.0.0.1:0.
//! Every test has its own topics and consumer group; retry tiers are hundreds of ms.

use std::collections::HashSet;
use std::time::Duration;

use base64::Engine;
use hmac::{Hmac, Mac};
use hookline_core::WebhookEvent;
use hookline_core::envelope::ErrorReason;
use hookline_core::schema::WEBHOOK_EVENT_V1;
use hookline_testkit::{Reply, read_all, wait_until};
use rdkafka::message::Message;
use sha2::Sha256;
use tokio_util::sync::CancellationToken;

use crate::harness::{DEADLINE, Harness, SECRET, event};

/// The Standard Webhooks signature, computed here independently of the dispatcher.
pub(crate) fn expected_signature(id: &str, timestamp: &str, body: &[u8]) -> String {
    let key = base64::engine::general_purpose::STANDARD
        .decode(SECRET.trim_start_matches("whsec_"))
        .expect("secret");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("key");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_healthy_endpoint_gets_every_event_once_signed_and_unchanged() {
    let mut h = Harness::new("healthy").await;
    let url = h.receiver.script("ok", |_| Reply::Status(204));
    h.put_endpoint(
        "ep-ok",
        serde_json::json!({ "url": url, "secrets": [SECRET] }),
    )
    .await;
    h.start(h.config()).await;

    let mut sent = Vec::new();
    for n in 0..20 {
        let event = event("ep-ok", n);
        // Half Avro through the registry, half JSON: the dispatcher takes both.
        if n % 2 == 0 {
            h.publish_avro(&event).await;
        } else {
            h.publish_json(&event).await;
        }
        sent.push(event);
    }
    wait_until(DEADLINE, "20 deliveries", || async {
        (h.receiver.count("ok") >= 20).then_some(())
    })
    .await;

    let received = h.receiver.received("ok");
    for event in &sent {
        let copies: Vec<_> = received
            .iter()
            .filter(|r| r.header("webhook-id") == Some(&event.event_id))
            .collect();
        assert_eq!(copies.len(), 1, "{} delivered exactly once", event.event_id);
        let request = copies[0];
        assert_eq!(
            request.body.as_ref(),
            event.payload.as_slice(),
            "body as published"
        );
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(
            request.header("x-tenant"),
            Some("acme"),
            "the event's own header"
        );
        let timestamp = request.header("webhook-timestamp").expect("timestamp");
        assert_eq!(
            request.header("webhook-signature"),
            Some(expected_signature(&event.event_id, timestamp, &event.payload).as_str()),
            "a valid Standard Webhooks signature"
        );
    }
    // The admin port answers as an orchestrator and Prometheus expect.
    let admin = h
        .running
        .as_ref()
        .and_then(|r| r.admin_addr())
        .expect("admin port");
    for (path, needle) in [
        ("healthz", "ok"),
        ("readyz", "ready"),
        ("metrics", "webhook_delivery_total"),
    ] {
        let response = reqwest::get(format!("http://{admin}/{path}"))
            .await
            .expect(path);
        assert_eq!(response.status(), 200, "/{path}");
        assert!(
            response.text().await.expect("body").contains(needle),
            "/{path}"
        );
    }
    // Nothing more arrives, and nothing went to the DLQ or a retry tier.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.receiver.count("ok"), 20);
    assert!(
        h.metrics()
            .contains(r#"webhook_delivery_total{status="succeeded"} 20"#),
        "{}",
        h.metrics()
    );
    assert!(
        !h.metrics().contains("webhook_dlq_total{"),
        "{}",
        h.metrics()
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_endpoint_failing_twice_gets_the_event_on_the_third_attempt_after_its_due_times() {
    let mut h = Harness::new("flaky").await;
    let url = h.receiver.script("flaky", |n| {
        if n < 2 {
            Reply::Status(503)
        } else {
            Reply::Status(200)
        }
    });
    h.put_endpoint("ep-flaky", serde_json::json!({ "url": url }))
        .await;
    h.start(h.config()).await;

    let event = event("ep-flaky", 1);
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    h.publish_json_traced(&event, &format!("00-{trace}-00f067aa0ba902b7-01"))
        .await;
    wait_until(DEADLINE, "the third attempt", || async {
        (h.receiver.count("flaky") >= 3).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;

    let attempts = h.receiver.received("flaky");
    assert_eq!(
        attempts.len(),
        3,
        "two failures, then one success, then nothing"
    );
    for attempt in &attempts {
        assert_eq!(
            attempt.header("webhook-id"),
            Some(event.event_id.as_str()),
            "same id every time"
        );
    }
    // Every attempt is a span of the producer's trace, each with its own span id.
    let spans: HashSet<&str> = attempts
        .iter()
        .map(|a| {
            let traceparent = a.header("traceparent").expect("a traceparent");
            assert!(
                traceparent.starts_with(&format!("00-{trace}-")),
                "{traceparent}"
            );
            traceparent
        })
        .collect();
    assert_eq!(spans.len(), 3);
    for pair in attempts.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(
            gap >= Duration::from_millis(300),
            "an attempt came {gap:?} after the previous one, before its due time"
        );
    }
    assert_eq!(attempts[1].header("webhook-attempt"), Some("2"));
    assert_eq!(attempts[2].header("webhook-attempt"), Some("3"));
    // A 300 ms delay goes to the smallest tier not shorter than it: 500ms, twice.
    let metrics = h.metrics();
    assert!(
        metrics.contains(r#"webhook_retries_total{tier="500ms"} 2"#),
        "{metrics}"
    );
    let tier = read_all(&h.kafka, &h.topics.tier_topic("500ms"), 2, DEADLINE).await;
    assert_eq!(tier.len(), 2);
    assert_eq!(
        tier[0].payload(),
        Some(event.to_json().as_slice()),
        "the retry keeps the original bytes"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_always_failing_endpoint_ends_in_the_dlq_after_the_configured_attempts() {
    let mut h = Harness::new("down").await;
    let url = h.receiver.script("down", |_| Reply::Status(500));
    h.put_endpoint("ep-down", serde_json::json!({ "url": url }))
        .await;
    h.start(h.config()).await;

    let event = event("ep-down", 7);
    let original = h
        .registry
        // Written as a producer built before event schema v2 writes it.
        .encode_value(
            &h.topics.events,
            WEBHOOK_EVENT_V1,
            hookline_testkit::v1_avro_value(&event),
        )
        .await
        .expect("encode");
    let (partition, offset) = h
        .publish_bytes("ep-down", &original, Some(&event.event_id))
        .await;

    let dlq = h.dlq(1).await;
    assert_eq!(dlq.len(), 1);
    let (envelope, message) = &dlq[0];
    assert_eq!(envelope.error_reason, ErrorReason::RetriesExhausted);
    assert_eq!(envelope.attempts, 3);
    assert_eq!(envelope.last_status_code, Some(500));
    assert_eq!(envelope.event_id, event.event_id);
    assert_eq!(envelope.endpoint_id.as_deref(), Some("ep-down"));
    assert_eq!(envelope.original_topic, h.topics.events);
    assert_eq!(envelope.original_partition, partition);
    assert_eq!(envelope.original_offset, offset);
    assert_eq!(
        envelope.original_payload_bytes, original,
        "the exact original bytes"
    );
    assert_eq!(message.key(), Some(&b"ep-down"[..]));
    assert!(!envelope.error_message.contains("whsec_"));
    assert_eq!(h.receiver.count("down"), 3);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rejected_records_go_straight_to_the_dlq_with_their_reason_and_the_rest_flows() {
    let mut h = Harness::new("reject").await;
    let ok = h.receiver.script("ok", |_| Reply::Status(200));
    let gone = h.receiver.script("gone", |_| Reply::Status(410));
    h.put_endpoint("ep-ok", serde_json::json!({ "url": ok }))
        .await;
    h.put_endpoint("ep-gone", serde_json::json!({ "url": gone }))
        .await;
    h.put_endpoint("ep-off", serde_json::json!({ "url": ok, "enabled": false }))
        .await;
    // Link-local (the cloud metadata address): refused before any connection is made.
    h.put_endpoint(
        "ep-meta",
        serde_json::json!({ "url": "http://169.254.169.254/latest" }),
    )
    .await;
    h.start(h.config()).await;

    h.publish_json(&event("ep-gone", 1)).await;
    h.publish_bytes("ep-ok", b"{this is not json", None).await;
    h.publish_json(&event("ep-nobody", 2)).await;
    h.publish_json(&event("ep-meta", 3)).await;
    h.publish_json(&event("ep-off", 4)).await;
    let fine = event("ep-ok", 5);
    h.publish_json(&fine).await;

    let dlq = h.dlq(5).await;
    let reasons: HashSet<ErrorReason> = dlq.iter().map(|(e, _)| e.error_reason).collect();
    assert_eq!(
        reasons,
        HashSet::from([
            ErrorReason::NonRetryableStatus,
            ErrorReason::MalformedEvent,
            ErrorReason::UnknownEndpoint,
            ErrorReason::BlockedUrl,
            ErrorReason::EndpointDisabled,
        ])
    );
    assert_eq!(dlq.len(), 5, "one record each");
    let malformed = dlq
        .iter()
        .find(|(e, _)| e.error_reason == ErrorReason::MalformedEvent)
        .expect("malformed");
    assert_eq!(
        malformed.0.original_payload_bytes,
        b"{this is not json".to_vec()
    );
    let gone_envelope = dlq
        .iter()
        .find(|(e, _)| e.error_reason == ErrorReason::NonRetryableStatus)
        .expect("410");
    assert_eq!(gone_envelope.0.last_status_code, Some(410));
    assert_eq!(
        gone_envelope.0.attempts, 1,
        "a non-retryable status is not retried"
    );
    assert_eq!(h.receiver.count("gone"), 1);
    wait_until(DEADLINE, "the good event", || async {
        (h.receiver.count("ok") == 1).then_some(())
    })
    .await;
    assert_eq!(
        h.receiver.received("ok")[0].header("webhook-id"),
        Some(fine.event_id.as_str())
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_429_with_retry_after_is_not_retried_earlier_than_asked() {
    let mut h = Harness::new("429").await;
    let url = h.receiver.script("busy", |n| {
        if n == 0 {
            Reply::TooManyRequests { retry_after_s: 2 }
        } else {
            Reply::Status(200)
        }
    });
    h.put_endpoint("ep-busy", serde_json::json!({ "url": url }))
        .await;
    h.start(h.config()).await;
    h.publish_json(&event("ep-busy", 1)).await;
    wait_until(DEADLINE, "the second attempt", || async {
        (h.receiver.count("busy") >= 2).then_some(())
    })
    .await;
    let attempts = h.receiver.received("busy");
    let gap = attempts[1].at - attempts[0].at;
    assert!(
        gap >= Duration::from_secs(2),
        "retried after {gap:?}, earlier than the 2 s asked"
    );
    // 2 s is beyond the largest tier (1 s): the record waited there for its due time.
    assert!(
        h.metrics()
            .contains(r#"webhook_retries_total{tier="1s"} 1"#),
        "{}",
        h.metrics()
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_endpoint_does_not_hold_up_a_healthy_one() {
    let mut h = Harness::new("dead").await;
    let dead = h.receiver.script("dead", |_| Reply::Hang);
    let ok = h.receiver.script("ok", |_| Reply::Status(200));
    h.put_endpoint(
        "ep-dead",
        serde_json::json!({ "url": dead, "timeout_ms": 10_000, "max_concurrency": 2 }),
    )
    .await;
    h.put_endpoint("ep-ok", serde_json::json!({ "url": ok }))
        .await;
    // A small per-endpoint queue: the dead endpoint's surplus is deferred to a retry tier.
    let mut config = h.config();
    config.concurrency.per_endpoint_queue = 4;
    h.start(config).await;

    for n in 0..10 {
        h.publish_json(&event("ep-dead", n)).await;
        h.publish_json(&event("ep-ok", n)).await;
    }
    // All ten healthy deliveries arrive while the dead endpoint's first attempts still hang
    // (they would only time out after 10 s).
    let started = std::time::Instant::now();
    wait_until(
        Duration::from_secs(8),
        "the healthy endpoint's ten deliveries",
        || async { (h.receiver.count("ok") >= 10).then_some(()) },
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(8));
    assert!(h.receiver.count("dead") >= 1, "the dead endpoint was tried");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_endpoint_rate_limit_spaces_its_deliveries() {
    let mut h = Harness::new("rate").await;
    let url = h.receiver.script("slow-down", |_| Reply::Status(200));
    h.put_endpoint(
        "ep-rate",
        serde_json::json!({ "url": url, "rate_limit_per_s": 5.0 }),
    )
    .await;
    h.start(h.config()).await;
    for n in 0..6 {
        h.publish_json(&event("ep-rate", n)).await;
    }
    wait_until(DEADLINE, "six deliveries", || async {
        (h.receiver.count("slow-down") >= 6).then_some(())
    })
    .await;
    let received = h.receiver.received("slow-down");
    let span = received[5].at - received[0].at;
    // Five gaps of 200 ms at 5 per second (with a little slack for timer granularity).
    assert!(
        span >= Duration::from_millis(950),
        "six deliveries within {span:?}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_strict_ordering_endpoint_gets_its_events_in_order_even_through_failures() {
    let mut h = Harness::new("strict").await;
    // The first event fails twice; nothing after it may arrive before it succeeds.
    let url = h.receiver.script("ordered", |n| {
        if n < 2 {
            Reply::Status(503)
        } else {
            Reply::Status(200)
        }
    });
    h.put_endpoint(
        "ep-ordered",
        serde_json::json!({ "url": url, "strict_ordering": true }),
    )
    .await;
    h.start(h.config()).await;
    let events: Vec<WebhookEvent> = (0..6).map(|n| event("ep-ordered", n)).collect();
    for event in &events {
        h.publish_json(event).await;
    }
    wait_until(DEADLINE, "six successful deliveries", || async {
        (h.receiver.count("ordered") >= 8).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ids: Vec<String> = h
        .receiver
        .received("ordered")
        .iter()
        .map(|r| r.header("webhook-id").unwrap_or_default().to_owned())
        .collect();
    let expected: Vec<String> = std::iter::repeat_n(events[0].event_id.clone(), 3)
        .chain(events[1..].iter().map(|e| e.event_id.clone()))
        .collect();
    assert_eq!(
        ids, expected,
        "the first event's three attempts, then the rest in order"
    );
    // Retried in place, not through a tier.
    assert!(
        !h.metrics().contains("webhook_retries_total{"),
        "{}",
        h.metrics()
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_registry_outage_holds_avro_events_until_it_is_back_and_parking_needs_no_registry() {
    let mut h = Harness::new("outage").await;
    let gone = h.receiver.script("gone", |_| Reply::Status(410));
    h.put_endpoint("ep-gone", serde_json::json!({ "url": gone }))
        .await;
    let ok = h.receiver.script("ok", |_| Reply::Status(204));
    h.put_endpoint("ep-ok", serde_json::json!({ "url": ok }))
        .await;
    let (config, proxy) = h.config_behind_registry_proxy().await;
    let group = config.group_id.clone();
    h.start(config).await;
    // Known fast, its records are delivered from the events topic itself.
    h.warm("ep-ok", "ok").await;
    proxy.set_down();

    // A 410 means the DLQ; the envelope is framed with the schema id registered at
    // start-up, so parking needs no registry.
    let gone_event = event("ep-gone", 1);
    h.publish_json(&gone_event).await;
    let dlq = h.dlq(1).await;
    assert_eq!(dlq[0].0.event_id, gone_event.event_id);
    assert_eq!(dlq[0].0.error_reason, ErrorReason::NonRetryableStatus);

    // An Avro event cannot be decoded while the registry is away: it waits (it is not a
    // malformed event), and its offset is not committed past.
    let avro = event("ep-ok", 2);
    let (partition, offset) = h.publish_avro(&avro).await;
    h.wait_for_metric("webhook_registry_waits_total", 3).await;
    assert_eq!(
        h.receiver.count("ok"),
        1,
        "not delivered without its schema (the one request is the warm-up's)"
    );
    assert!(
        h.committed(&group, partition).is_none_or(|c| c <= offset),
        "the offset was committed past a record whose outcome was not durable"
    );
    assert!(
        !h.metrics()
            .contains(r#"webhook_dlq_total{reason="malformed_event"}"#),
        "a registry outage is not a malformed event: {}",
        h.metrics()
    );

    proxy.set_up();
    h.wait_for_requests("ok", 2).await;
    assert_eq!(
        h.receiver.received("ok")[1].header("webhook-id"),
        Some(avro.event_id.as_str())
    );
    wait_until(DEADLINE, "the commit past the record", || async {
        h.committed(&group, partition)
            .is_some_and(|c| c > offset)
            .then_some(())
    })
    .await;
    h.stop().await;
}

/// An error and its causes, as the binary prints them.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_static_endpoints_file_serves_without_the_endpoints_topic() {
    let mut h = Harness::new("file").await;
    let url = h.receiver.script("filed", |_| Reply::Status(200));
    let dir = tempfile::tempdir().expect("temp dir");
    let good = dir.path().join("endpoints.toml");
    std::fs::write(
        &good,
        format!("[endpoints.ep-file]\nurl = \"{url}\"\nsecrets = [\"{SECRET}\"]\n"),
    )
    .expect("write");
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        format!("[endpoints.ep-bad]\nurl = \"ftp://example.com/x\"\nsecrets = [\"{SECRET}\"]\n"),
    )
    .expect("write");

    // A file with an unusable endpoint stops start-up, naming the file and the endpoint.
    let mut config = h.config();
    config.topics.endpoints = String::new();
    config.endpoints_file = Some(bad.clone());
    let settings = config.into_settings().expect("valid settings");
    let refused = hookline_dispatcher::start(settings, CancellationToken::new())
        .await
        .err()
        .expect("a bad endpoints file is refused at start-up");
    let message = chain(&refused);
    assert!(
        message.contains("bad.toml") && message.contains("ep-bad"),
        "{message}"
    );

    // Only the file: the endpoints topic is not read at all.
    let mut config = h.config();
    config.topics.endpoints = String::new();
    config.endpoints_file = Some(good);
    h.start(config).await;
    let event = event("ep-file", 1);
    h.publish_json(&event).await;
    wait_until(DEADLINE, "the delivery", || async {
        (h.receiver.count("filed") >= 1).then_some(())
    })
    .await;
    let request = &h.receiver.received("filed")[0];
    assert_eq!(request.header("webhook-id"), Some(event.event_id.as_str()));
    assert!(
        request
            .header("webhook-signature")
            .is_some_and(|s| s.starts_with("v1,"))
    );
    h.stop().await;
}
