//! The attempt log: every attempt, retry and park of an event as a registry-framed record on
//! `<events>.attempts`, keyed by event id, in the partition murmur2 computes; a log that
//! cannot be written never holds up a delivery.

use hookline_core::attempt_log::{AttemptKind, AttemptRecord, partition_for};
use hookline_core::schema::webhook_attempt_schema;
use hookline_testkit::{Reply, read_all, wait_until};
use rdkafka::message::{Message, OwnedMessage};

use crate::harness::{DEADLINE, Harness, event};

/// Decodes each record through the registry (it must know the schema id) and into the
/// record type; checks the key is the event id.
async fn decoded(h: &Harness, messages: &[OwnedMessage]) -> Vec<(i32, AttemptRecord)> {
    let mut out = Vec::new();
    for message in messages {
        let value = message.payload().expect("a value");
        h.registry
            .decode(value)
            .await
            .expect("decodes through the registry");
        let (_, datum) = AttemptRecord::split_framed(value).expect("framed");
        let record =
            AttemptRecord::from_avro_datum(datum, webhook_attempt_schema()).expect("a record");
        assert_eq!(
            message.key(),
            Some(record.event_id.as_bytes()),
            "keyed by event id"
        );
        out.push((message.partition(), record));
    }
    out.sort_by_key(|(_, r)| (r.timestamp_ms, r.attempt));
    out
}

/// `records` but the deferrals to the slow lane (a new endpoint's first records wait there
/// until it shows itself fast), each checked to be one.
fn without_lane(records: Vec<(i32, AttemptRecord)>) -> Vec<(i32, AttemptRecord)> {
    let (laned, rest): (Vec<_>, Vec<_>) = records
        .into_iter()
        .partition(|(_, r)| r.kind == AttemptKind::Deferred);
    for (_, record) in &laned {
        assert_eq!(record.tier.as_deref(), Some("lane"), "{record:?}");
        assert_eq!(record.reason.as_deref(), Some("endpoint_new"), "{record:?}");
        assert!(record.http_status.is_none(), "a deferral is not an attempt");
    }
    rest
}

/// Publishes `count` traced events to `ep-ok` and waits until its receiver (`ok`) has them
/// all.
async fn publish_and_deliver(h: &Harness, count: usize) {
    for n in 0..count {
        h.publish_json_traced(
            &event("ep-ok", n),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .await;
    }
    wait_until(DEADLINE, "every delivery", || async {
        (h.receiver.count("ok") >= count).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_then_delivered_event_logs_its_attempts_and_retry_in_one_partition() {
    let mut h = Harness::new("attempts-flaky").await;
    let url = h.receiver.script("flaky", |n| {
        if n < 1 {
            Reply::Status(500)
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

    // The endpoint is new (not yet seen to answer well): the event waits its turn in the
    // slow lane before its first attempt, and says so. That attempt fails at once: its
    // retry runs from the tier, where it is.
    let messages = read_all(&h.kafka, &h.topics.attempts, 4, DEADLINE).await;
    let records = without_lane(decoded(&h, &messages).await);
    let kinds: Vec<(AttemptKind, u32, Option<u16>)> = records
        .iter()
        .map(|(_, r)| (r.kind, r.attempt, r.http_status))
        .collect();
    assert_eq!(
        kinds,
        [
            (AttemptKind::Attempt, 1, Some(500)),
            (AttemptKind::RetryScheduled, 1, None),
            (AttemptKind::Attempt, 2, Some(200)),
        ]
    );
    let expected = partition_for(event.event_id.as_bytes(), 2).expect("a partition");
    for (partition, record) in &records {
        assert_eq!(*partition, expected, "the partition murmur2 computes");
        assert_eq!(record.event_id, event.event_id);
        assert_eq!(record.endpoint_id.as_deref(), Some("ep-flaky"));
        assert_eq!(record.trace_id.as_deref(), Some(trace));
    }
    let (first, retry, second) = (&records[0].1, &records[1].1, &records[2].1);
    assert_eq!(first.error_kind.as_deref(), Some("http_5xx"));
    assert!(first.duration_ms.is_some());
    assert_eq!(retry.tier.as_deref(), Some("500ms"));
    assert_eq!(retry.reason.as_deref(), Some("http_5xx"));
    assert_eq!(second.error_kind, None, "a success has no error kind");
    let metrics = h.metrics();
    assert!(
        metrics.contains("webhook_attempt_log_written_total 4"),
        "three, and one deferral to the lane: {metrics}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_last_attempts_reach_the_log_when_the_dispatcher_stops_right_after_them() {
    let mut h = Harness::new("attempts-stop").await;
    let url = h.receiver.script("ok", |_| Reply::Status(200));
    h.put_endpoint("ep-ok", serde_json::json!({ "url": url }))
        .await;
    let mut config = h.config();
    // The producer holds its records far longer than the stop takes: they are still in it
    // when the dispatcher goes, and only its flush at shutdown sends them.
    config.attempts.linger_ms = 10_000;
    h.start(config).await;
    let count = 20;
    publish_and_deliver(&h, count).await;
    // A new endpoint's first burst past its first attempts waits in the slow lane: those
    // deferrals are logged too.
    let deferred = usize::try_from(h.metric_sum("webhook_deferrals_total")).expect("small");
    h.stop().await;
    let messages = read_all(&h.kafka, &h.topics.attempts, count + deferred, DEADLINE).await;
    let records = decoded(&h, &messages).await;
    let attempts: Vec<_> = records
        .iter()
        .filter(|(_, r)| r.kind == AttemptKind::Attempt)
        .collect();
    assert_eq!(attempts.len(), count);
    assert!(
        attempts.iter().all(|(_, r)| r.http_status == Some(200)),
        "one 2xx attempt per event"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_parked_event_logs_its_park_with_the_reason() {
    let mut h = Harness::new("attempts-park").await;
    let url = h.receiver.script("bad", |_| Reply::Status(400));
    h.put_endpoint("ep-bad", serde_json::json!({ "url": url }))
        .await;
    h.start(h.config()).await;
    let event = event("ep-bad", 1);
    h.publish_json_traced(
        &event,
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    )
    .await;
    let messages = read_all(&h.kafka, &h.topics.attempts, 3, DEADLINE).await;
    let records = without_lane(decoded(&h, &messages).await);
    assert_eq!(records[0].1.kind, AttemptKind::Attempt);
    assert_eq!(records[0].1.http_status, Some(400));
    let park = &records[1].1;
    assert_eq!(park.kind, AttemptKind::Parked);
    assert_eq!(park.reason.as_deref(), Some("non_retryable_status"));
    assert_eq!(park.attempt, 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deliveries_all_arrive_when_the_log_cannot_keep_up_and_drops_are_counted() {
    let mut h = Harness::new("attempts-drop").await;
    let url = h.receiver.script("ok", |_| Reply::Status(200));
    h.put_endpoint("ep-ok", serde_json::json!({ "url": url }))
        .await;
    let mut config = h.config();
    // A topic that does not exist (the broker does not create it: the log's producer waits
    // for it and its one-record queue stays full).
    config.attempts.topic = Some(format!("{}.missing-attempts", h.topics.events));
    config.attempts.buffer = 1;
    h.start(config).await;
    let count = 50;
    publish_and_deliver(&h, count).await;
    let dropped = wait_until(DEADLINE, "drops counted", || async {
        let metrics = h.metrics();
        metrics
            .lines()
            .find(|l| l.starts_with(r#"webhook_attempt_log_dropped_total{reason="buffer_full"}"#))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .filter(|n| *n > 0)
    })
    .await;
    // At most one record per attempt and per deferral (a new endpoint's first burst goes
    // partly to the slow lane).
    let logged = count as u64 + h.metric_sum("webhook_deferrals_total");
    assert!(dropped <= logged, "{dropped} of {logged}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fanned_out_tenant_event_logs_how_many_deliveries_it_became() {
    let mut h = Harness::new("attempts-fan").await;
    let mut endpoints = Vec::new();
    for name in ["fan-a", "fan-b"] {
        let url = h.receiver.script(name, |_| Reply::Status(204));
        endpoints.push((
            name.to_owned(),
            serde_json::json!({"url": url, "tenant": "acme"}),
        ));
    }
    h.put_endpoints(endpoints).await;
    h.start(h.fanout_config()).await;
    let event = hookline_core::WebhookEvent {
        endpoint_id: None,
        tenant_id: Some("acme".to_owned()),
        ..event("unused", 1)
    };
    h.publish_tenant_event(&event).await;
    // The fan-out record and one attempt per subscriber.
    let messages = read_all(&h.kafka, &h.topics.attempts, 3, DEADLINE).await;
    let records = decoded(&h, &messages).await;
    let fanned: Vec<&AttemptRecord> = records
        .iter()
        .map(|(_, r)| r)
        .filter(|r| r.kind == AttemptKind::FannedOut)
        .collect();
    assert_eq!(fanned.len(), 1, "{records:?}");
    assert_eq!(fanned[0].event_id, event.event_id);
    assert_eq!(fanned[0].tenant_id.as_deref(), Some("acme"));
    assert_eq!(fanned[0].deliveries, Some(2));
    let attempts = records
        .iter()
        .filter(|(_, r)| r.kind == AttemptKind::Attempt && r.http_status == Some(204))
        .count();
    assert_eq!(attempts, 2, "{records:?}");
    h.stop().await;
}
