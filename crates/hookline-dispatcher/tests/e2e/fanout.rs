//! Tenant events fanned out by the fan-out stage inside the dispatcher: each subscribed
//! endpoint gets the event once, with the event id as `webhook-id`; nobody else gets it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use hookline_core::WebhookEvent;
use hookline_core::envelope::ErrorReason;
use hookline_testkit::{Reply, read_all, unique_name, wait_until};
use rdkafka::message::Message;

use crate::harness::{DEADLINE, Harness};

fn tenant_event(tenant: &str, event_type: &str, channels: &[&str], n: usize) -> WebhookEvent {
    WebhookEvent {
        event_id: format!("evt-{}-{n}", unique_name("fan")),
        event_type: event_type.to_owned(),
        endpoint_id: None,
        tenant_id: Some(tenant.to_owned()),
        channels: channels.iter().map(|c| (*c).to_owned()).collect(),
        endpoint_url: None,
        payload: format!(r#"{{"n":{n}}}"#).into_bytes(),
        content_type: "application/json".to_owned(),
        headers: BTreeMap::new(),
        created_at_ms: 0,
        expires_at_ms: None,
    }
}

/// The `webhook-id`s `name` received, in arrival order.
fn ids(h: &Harness, name: &str) -> Vec<String> {
    h.receiver
        .received(name)
        .iter()
        .filter_map(|r| r.header("webhook-id").map(str::to_owned))
        .collect()
}

/// One event for a tenant with 1,000 subscribed endpoints reaches each exactly once; the
/// tenant's other endpoints and another tenant's get nothing; the one failing endpoint
/// retries and parks on its own, after the others have theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_event_reaches_each_of_a_thousand_subscribers_once() {
    let mut h = Harness::new("fan1000").await;
    let mut endpoints = Vec::new();
    for i in 0..1_000 {
        let name = format!("sub-{i:04}");
        let url = if i == 0 {
            h.receiver.script(&name, |_| Reply::Status(500))
        } else {
            h.receiver.script(&name, |_| Reply::Status(204))
        };
        let types = if i % 2 == 0 {
            "invoice.*"
        } else {
            "invoice.paid"
        };
        endpoints.push((
            name,
            serde_json::json!({"url": url, "tenant": "acme", "event_types": [types]}),
        ));
    }
    for i in 0..20 {
        let name = format!("other-type-{i}");
        let url = h.receiver.script(&name, |_| Reply::Status(204));
        endpoints.push((
            name,
            serde_json::json!({"url": url, "tenant": "acme", "event_types": ["customer.*"]}),
        ));
        let name = format!("other-tenant-{i}");
        let url = h.receiver.script(&name, |_| Reply::Status(204));
        endpoints.push((name, serde_json::json!({"url": url, "tenant": "globex"})));
    }
    h.put_endpoints(endpoints).await;
    h.start(h.fanout_config()).await;

    let event = tenant_event("acme", "invoice.paid", &[], 1);
    h.publish_tenant_event(&event).await;
    wait_until(DEADLINE, "999 healthy subscribers served", || async {
        (1..1_000)
            .all(|i| h.receiver.count(&format!("sub-{i:04}")) >= 1)
            .then_some(())
    })
    .await;
    let served_at = Instant::now();
    let dlq = h.dlq(1).await;
    let parked_at = Instant::now();
    assert!(served_at <= parked_at);
    let (envelope, _) = &dlq[0];
    assert_eq!(envelope.endpoint_id.as_deref(), Some("sub-0000"));
    assert_eq!(envelope.event_id, event.event_id);
    assert_eq!(envelope.error_reason, ErrorReason::RetriesExhausted);
    assert_eq!(h.receiver.count("sub-0000"), 3, "the failing one retried");

    for i in 1..1_000 {
        assert_eq!(ids(&h, &format!("sub-{i:04}")), [event.event_id.as_str()]);
    }
    // The deliveries were written in one transaction: the events topic holds exactly one
    // per subscriber, so the others got nothing and never will.
    let records = read_all(&h.kafka, &h.topics.events, 1_000, DEADLINE).await;
    let keys: BTreeSet<String> = records
        .iter()
        .filter_map(|m| m.key().map(|k| String::from_utf8_lossy(k).into_owned()))
        .collect();
    assert_eq!(records.len(), 1_000);
    assert_eq!(keys, (0..1_000).map(|i| format!("sub-{i:04}")).collect());
    for i in 0..20 {
        assert_eq!(h.receiver.count(&format!("other-type-{i}")), 0);
        assert_eq!(h.receiver.count(&format!("other-tenant-{i}")), 0);
    }
    assert_eq!(h.metric("webhook_fanout_total{outcome=\"fanned_out\"}"), 1);
    assert_eq!(h.metric("webhook_fanout_deliveries_total"), 1_000);
    h.stop().await;
}

/// Wildcards and channels pick exactly the expected endpoints; an endpoint added between
/// two events gets only the second, a removed one nothing after its removal; an event no
/// endpoint wants is counted, not parked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patterns_channels_and_changes_between_events() {
    let mut h = Harness::new("fanrules").await;
    let subscriptions = [
        ("wild", serde_json::json!({"event_types": ["invoice.*"]})),
        (
            "exact",
            serde_json::json!({"event_types": ["invoice.paid"]}),
        ),
        ("all", serde_json::json!({})),
        ("star", serde_json::json!({"event_types": ["*"]})),
        (
            "customer",
            serde_json::json!({"event_types": ["customer.created"]}),
        ),
        (
            "eu",
            serde_json::json!({"event_types": ["invoice.*"], "channels": ["eu"]}),
        ),
        ("us", serde_json::json!({"channels": ["us"]})),
    ];
    let mut endpoints = Vec::new();
    for (name, mut config) in subscriptions {
        config["url"] = h.receiver.script(name, |_| Reply::Status(204)).into();
        config["tenant"] = "acme".into();
        endpoints.push((name.to_owned(), config));
    }
    h.put_endpoints(endpoints).await;
    h.start(h.fanout_config()).await;

    let first = tenant_event("acme", "invoice.paid", &["eu"], 1);
    h.publish_tenant_event(&first).await;
    let expected_first = ["wild", "exact", "all", "star", "eu"];
    for name in expected_first {
        h.wait_for_requests(name, 1).await;
    }

    // Between the events: one endpoint added, one removed; the second event is published
    // right after, without waiting for the dispatcher to see the changes.
    let url = h.receiver.script("late", |_| Reply::Status(204));
    h.put_endpoints(vec![(
        "late".to_owned(),
        serde_json::json!({"url": url, "tenant": "acme", "event_types": ["invoice.paid"]}),
    )])
    .await;
    h.remove_endpoint("exact").await;
    let second = tenant_event("acme", "invoice.paid", &[], 2);
    h.publish_tenant_event(&second).await;
    let nobody = tenant_event("initech", "invoice.paid", &[], 3);
    h.publish_tenant_event(&nobody).await;
    let expected_second = ["wild", "all", "star", "late"];
    for name in expected_second {
        h.wait_for_requests(name, if name == "late" { 1 } else { 2 })
            .await;
    }
    h.wait_for_metric("webhook_fanout_total{outcome=\"no_subscribers\"}", 1)
        .await;

    // Every delivery is in the events topic: exactly these, nothing else.
    let total = expected_first.len() + expected_second.len();
    let records = read_all(&h.kafka, &h.topics.events, total, DEADLINE).await;
    assert_eq!(records.len(), total);
    let (a, b) = (first.event_id.clone(), second.event_id.clone());
    assert_eq!(ids(&h, "wild"), [a.clone(), b.clone()]);
    assert_eq!(ids(&h, "all"), [a.clone(), b.clone()]);
    assert_eq!(ids(&h, "star"), [a.clone(), b.clone()]);
    assert_eq!(ids(&h, "exact"), [a.as_str()], "removed before the second");
    assert_eq!(ids(&h, "eu"), [a.as_str()], "the second has no channel");
    assert_eq!(ids(&h, "late"), [b], "added after the first");
    assert!(ids(&h, "customer").is_empty());
    assert!(ids(&h, "us").is_empty());
    assert_eq!(h.metric_sum("webhook_dlq_total"), 0, "nothing parked");
    h.stop().await;
}

/// A tenant event that cannot be fanned out (not an event; one that names an endpoint) is
/// parked with its reason and its bytes, and the events after it are fanned out.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_tenant_events_are_parked_and_do_not_stop_the_fanout() {
    let mut h = Harness::new("fanbad").await;
    let url = h.receiver.script("ok", |_| Reply::Status(204));
    h.put_endpoints(vec![(
        "ok".to_owned(),
        serde_json::json!({"url": url, "tenant": "acme"}),
    )])
    .await;
    h.start(h.fanout_config()).await;
    let send = |value: Vec<u8>| {
        let producer = h.producer.clone();
        let topic = h.topics.fanout.clone();
        async move {
            producer
                .send(
                    rdkafka::producer::FutureRecord::to(&topic)
                        .key("acme")
                        .payload(&value),
                    DEADLINE,
                )
                .await
                .expect("written");
        }
    };
    send(b"not an event".to_vec()).await;
    let mut direct = tenant_event("acme", "invoice.paid", &[], 1);
    direct.endpoint_id = Some("ok".into());
    send(direct.to_json()).await;
    let good = tenant_event("acme", "invoice.paid", &[], 2);
    h.publish_tenant_event(&good).await;
    h.wait_for_requests("ok", 1).await;
    assert_eq!(ids(&h, "ok"), [good.event_id.as_str()]);
    let dlq = h.dlq(2).await;
    assert!(
        dlq.iter()
            .all(|(e, _)| e.error_reason == ErrorReason::MalformedEvent)
    );
    assert_eq!(dlq[0].0.original_payload_bytes, b"not an event");
    assert_eq!(dlq[0].0.original_topic, h.topics.fanout);
    assert!(
        dlq[1].0.error_message.contains("names endpoint"),
        "{}",
        dlq[1].0.error_message
    );
    assert_eq!(h.metric("webhook_fanout_total{outcome=\"parked\"}"), 2);
    h.stop().await;
}

/// An Avro tenant event is fanned out as Avro: each delivery framed with the id of event
/// schema v2, registered by the fan-out under the events topic's subject over a v1 schema
/// with BACKWARD compatibility (v2 reads v1).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn avro_tenant_events_become_avro_deliveries_of_schema_v2() {
    use hookline_core::event::confluent_schema_id;
    use hookline_core::schema::{WEBHOOK_EVENT_CURRENT, WEBHOOK_EVENT_V1};
    use hookline_kafka::Compatibility;

    let mut h = Harness::new("fanavro").await;
    let subject = format!("{}-value", h.topics.events);
    h.registry
        .set_compatibility(&subject, Compatibility::Backward)
        .await
        .expect("compatibility set");
    h.registry
        .register(&subject, WEBHOOK_EVENT_V1)
        .await
        .expect("v1 registered");
    let mut endpoints = Vec::new();
    for name in ["a", "b"] {
        let url = h.receiver.script(name, |_| Reply::Status(204));
        endpoints.push((
            name.to_owned(),
            serde_json::json!({"url": url, "tenant": "acme"}),
        ));
    }
    h.put_endpoints(endpoints).await;
    h.start(h.fanout_config()).await;

    let event = tenant_event("acme", "invoice.paid", &["eu"], 1);
    let value = h
        .registry
        .encode_value(
            &h.topics.fanout,
            WEBHOOK_EVENT_CURRENT,
            event.to_avro_value(),
        )
        .await
        .expect("encoded");
    h.producer
        .send(
            rdkafka::producer::FutureRecord::to(&h.topics.fanout)
                .key("acme")
                .payload(&value),
            DEADLINE,
        )
        .await
        .expect("written");
    for name in ["a", "b"] {
        h.wait_for_requests(name, 1).await;
        assert_eq!(ids(&h, name), [event.event_id.as_str()]);
        let body = &h.receiver.received(name)[0].body;
        assert_eq!(&body[..], &event.payload[..], "the exact payload");
    }
    let v2 = h
        .registry
        .register(&subject, WEBHOOK_EVENT_CURRENT)
        .await
        .expect("v2 is registered (again: the same id)");
    for record in read_all(&h.kafka, &h.topics.events, 2, DEADLINE).await {
        let bytes = record.payload().expect("a value");
        assert_eq!(confluent_schema_id(bytes), Some(v2));
        let decoded = WebhookEvent::from_avro_value(h.registry.decode(bytes).await.expect("Avro"))
            .expect("an event");
        let key = String::from_utf8_lossy(record.key().expect("a key")).into_owned();
        assert_eq!(decoded.endpoint_id.as_deref(), Some(key.as_str()));
        assert_eq!(decoded.tenant_id.as_deref(), Some("acme"));
        assert_eq!(decoded.channels, ["eu"]);
    }
    h.stop().await;
}
