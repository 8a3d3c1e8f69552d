//! Faults of the rebuilt delivery path, end to end against the real local stack: a pause
//! kept by librdkafka across a rebalance, a Retry-After longer than any tier on a shared tier
//! partition, a retry copy too large to write, the lag of a paused partition, and deliveries
//! cancelled when their partition is revoked. Each test has its own topics and group.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hookline_core::WebhookEvent;
use hookline_core::envelope::ErrorReason;
use hookline_core::headers::{
    ATTEMPT, DUE_AT, FIRST_ATTEMPT_AT, ORIGINAL_OFFSET, ORIGINAL_PARTITION, ORIGINAL_TOPIC,
    RETRY_AT,
};
use hookline_dispatcher::start;
use hookline_kafka::{Registry, TopicSpec, ensure_topics, read_headers};
use hookline_testkit::{
    Receiver, Reply, TestTopics, kafka_settings, read_all, registry_settings, unique_name,
    wait_until,
};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Header, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio_util::sync::CancellationToken;

use crate::harness::{DEADLINE, Harness, event};

const PAUSED: &str = r#"webhook_paused_partitions{state="not_due"}"#;

/// A harness with its own retry tiers, every topic with one partition.
async fn harness(test: &str, tiers: &[&str]) -> Harness {
    let kafka = kafka_settings();
    let topics = TestTopics::new(test, tiers);
    topics.create(&kafka, 1).await;
    Harness {
        registry: Arc::new(Registry::new(&registry_settings()).expect("registry")),
        receiver: Receiver::start().await,
        producer: kafka.producer_config().create().expect("producer"),
        shutdown: CancellationToken::new(),
        running: None,
        topics,
        kafka,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The monotonic instant of a wall-clock time, to compare with a request's arrival.
fn instant_of(at_ms: i64) -> Instant {
    let (now, ahead) = (Instant::now(), at_ms.saturating_sub(now_ms()));
    let by = Duration::from_millis(ahead.unsigned_abs());
    if ahead >= 0 { now + by } else { now - by }
}

/// Writes `event` straight into a retry tier, as hookline writes it after a failed first
/// attempt, due at `due_at_ms`.
async fn write_retry(h: &Harness, tier: &str, event: &WebhookEvent, due_at_ms: i64) {
    let (due, first) = (due_at_ms.to_string(), now_ms().to_string());
    let headers = [
        (ATTEMPT, "1"),
        (DUE_AT, due.as_str()),
        (ORIGINAL_TOPIC, h.topics.events.as_str()),
        (ORIGINAL_PARTITION, "0"),
        (ORIGINAL_OFFSET, "0"),
        (FIRST_ATTEMPT_AT, first.as_str()),
    ]
    .into_iter()
    .fold(OwnedHeaders::new(), |headers, (key, value)| {
        headers.insert(Header {
            key,
            value: Some(value),
        })
    });
    let topic = h.topics.tier_topic(tier);
    let value = event.to_json();
    let record = FutureRecord::to(&topic)
        .key(event.endpoint_id.as_deref().unwrap_or_default())
        .payload(&value)
        .headers(headers);
    h.producer
        .send(record, DEADLINE)
        .await
        .expect("retry record written");
}

/// A header of a record read back, as text.
fn header(message: &OwnedMessage, name: &str) -> Option<String> {
    read_headers(message)
        .into_iter()
        .rev()
        .find(|header| header.name == name.as_bytes())
        .and_then(|header| String::from_utf8(header.value?).ok())
}

fn header_ms(message: &OwnedMessage, name: &str) -> i64 {
    header(message, name)
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("a numeric {name} header"))
}

/// Makes `group` rebalance: a plain consumer joins it on a topic of its own, waits until it
/// is assigned that topic (the group's other members went through a revoke and an assign
/// meanwhile, eager protocol), then leaves (a second revoke and assign).
async fn rebalance(h: &Harness, group: &str) {
    let other = unique_name("other");
    ensure_topics(&h.kafka, &[TopicSpec::new(&other, 1, 1)])
        .await
        .expect("the other member's topic");
    let mut config = h.kafka.client_config();
    config
        .set("group.id", group)
        .set("enable.auto.commit", "false");
    let consumer: StreamConsumer = config.create().expect("the other member");
    consumer.subscribe(&[&other]).expect("subscribe");
    let give_up = tokio::time::Instant::now() + Duration::from_secs(30);
    while consumer.assignment().map_or(0, |a| a.count()) == 0 {
        assert!(
            tokio::time::Instant::now() < give_up,
            "the other member was never assigned its topic"
        );
        // Polling is what serves the join and the assignment.
        let _ = tokio::time::timeout(Duration::from_millis(100), consumer.recv()).await;
    }
    // Closing leaves the group with blocking calls.
    tokio::task::spawn_blocking(move || {
        consumer.unsubscribe();
        drop(consumer);
    })
    .await
    .expect("the other member left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_tier_partition_is_resumed_after_a_rebalance_hands_it_back() {
    let mut h = harness("repause", &["200ms", "20s"]).await;
    let url = h.receiver.script("ok", |_| Reply::Status(204));
    h.put_endpoint("ep-ok", serde_json::json!({ "url": url }))
        .await;
    // The classic protocol with an eager assignor: every rebalance revokes every partition
    // and assigns them again, the path on which a pause used to be forgotten. (With KIP-848
    // or cooperative-sticky the same happens when a member is fenced and rejoins.)
    let mut config = h.config();
    config.group_protocol = hookline_dispatcher::GroupProtocol::Classic;
    config.kafka.properties.insert(
        "partition.assignment.strategy".to_owned(),
        "range".to_owned(),
    );
    let group = config.group_id.clone();
    h.start(config).await;

    let event = event("ep-ok", 1);
    let due_ms = now_ms() + 12_000;
    write_retry(&h, "20s", &event, due_ms).await;
    h.wait_for_metric(PAUSED, 1).await;

    rebalance(&h, &group).await;
    assert!(
        now_ms() < due_ms,
        "the rebalance must happen while the record waits"
    );
    assert_eq!(
        h.receiver.count("ok"),
        0,
        "not delivered before its due time"
    );

    let deadline = Duration::from_millis(u64::try_from(due_ms - now_ms()).unwrap_or(0))
        + Duration::from_secs(30);
    wait_until(deadline, "the retry after the rebalance", || async {
        (h.receiver.count("ok") >= 1).then_some(())
    })
    .await;
    let received = h.receiver.received("ok");
    assert_eq!(
        received[0].header("webhook-id"),
        Some(event.event_id.as_str())
    );
    assert_eq!(received[0].header("webhook-attempt"), Some("2"));
    // Taken up at most DUE_SLACK_MS early; a few ms more for the two clocks compared.
    let due = instant_of(due_ms) - Duration::from_millis(20);
    assert!(received[0].at >= due, "delivered before its due time");
    h.wait_for_metric(r#"webhook_delivery_total{status="succeeded"}"#, 1)
        .await;
    assert_eq!(h.receiver.count("ok"), 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_endpoints_retry_after_does_not_pin_a_shared_tier_partition() {
    let mut h = harness("pin", &["200ms", "1s"]).await;
    let slow = h.receiver.script("slowdown", |_| Reply::TooManyRequests {
        retry_after_s: 80_000,
    });
    // The first five requests are the five events' first attempts (retries come >= 1 s
    // later).
    let flaky = h
        .receiver
        .script("flaky", |n| Reply::Status(if n < 5 { 503 } else { 204 }));
    h.put_endpoint("ep-a", serde_json::json!({ "url": slow }))
        .await;
    let retry = serde_json::json!({ "strategy": "fixed", "base_ms": 1000, "cap_ms": 1000 });
    h.put_endpoint("ep-b", serde_json::json!({ "url": flaky, "retry": retry }))
        .await;
    h.start(h.config()).await;

    // A's retry goes first into the 1s tier partition, ahead of B's.
    let before_a = now_ms();
    h.publish_json(&event("ep-a", 0)).await;
    h.wait_for_metric(r#"webhook_retries_total{tier="1s"}"#, 1)
        .await;
    let after_a = now_ms();
    let b_events: Vec<WebhookEvent> = (1..=5).map(|n| event("ep-b", n)).collect();
    for event in &b_events {
        h.publish_json(event).await;
    }

    wait_until(DEADLINE, "B's five retries delivered", || async {
        (h.receiver.count("flaky") >= 10).then_some(())
    })
    .await;
    let received = h.receiver.received("flaky");
    for event in &b_events {
        let attempts: Vec<(Option<&str>, &Reply)> = received
            .iter()
            .filter(|r| r.header("webhook-id") == Some(event.event_id.as_str()))
            .map(|r| (r.header("webhook-attempt"), &r.reply))
            .collect();
        assert_eq!(
            attempts,
            [
                (Some("1"), &Reply::Status(503)),
                (Some("2"), &Reply::Status(204))
            ],
            "{}",
            event.event_id
        );
    }
    assert_eq!(h.receiver.count("slowdown"), 1, "A is not attempted early");
    // A's copy hops once its second in the tier is up; the count follows the hop's write,
    // which may be acknowledged after B's retries went out.
    h.wait_for_metric(r#"webhook_tier_hops_total{tier="1s"}"#, 1)
        .await;

    // A's copies in the 1s tier wait at most the tier's delay each, and carry the time its
    // next attempt may start.
    let tier = read_all(&h.kafka, &h.topics.tier_topic("1s"), 6, DEADLINE).await;
    let copies: Vec<&OwnedMessage> = tier
        .iter()
        .filter(|m| m.key() == Some(&b"ep-a"[..]))
        .collect();
    assert!(!copies.is_empty());
    for copy in &copies {
        let written = copy.timestamp().to_millis().expect("a create time");
        let in_tier = header_ms(copy, DUE_AT) - written;
        assert!(
            (0..=1_050).contains(&in_tier),
            "waits {in_tier} ms in the 1s tier"
        );
        let retry_at = header_ms(copy, RETRY_AT);
        assert!(
            (before_a + 80_000_000..=after_a + 80_000_000).contains(&retry_at),
            "retry at {retry_at}, asked for 80000 s after {before_a}..{after_a}"
        );
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_copy_that_can_never_be_written_is_parked_not_retried_for_ever() {
    let mut h = harness("unwritable", &["500ms"]).await;
    // Its first answer (the warm-up's) shows it fast; the rest are 503.
    let down = h.receiver.script("down", |n| {
        if n == 0 {
            Reply::Status(204)
        } else {
            Reply::Status(503)
        }
    });
    let ok = h.receiver.script("ok", |_| Reply::Status(204));
    h.put_endpoint("ep-down", serde_json::json!({ "url": down }))
        .await;
    h.put_endpoint("ep-ok", serde_json::json!({ "url": ok }))
        .await;
    let mut config = h.config();
    config
        .kafka
        .properties
        .insert("message.max.bytes".to_owned(), "200000".to_owned());
    config.http.max_payload_bytes = 130_000;
    let group = config.group_id.clone();
    h.start(config).await;
    // Known fast, its records are attempted from the events topic itself.
    h.warm("ep-down", "down").await;

    // A deliverable 100 KB payload, and a 150 KB header another client added: the retry copy
    // (value and carried headers) is over the dispatcher's 200,000-byte limit.
    let mut big = event("ep-down", 1);
    big.payload = format!(r#"{{"blob":"{}"}}"#, "x".repeat(100_000)).into_bytes();
    let value = big.to_json();
    let mut raw = h.kafka.client_config();
    raw.set("message.max.bytes", "3000000");
    let raw: FutureProducer = raw.create().expect("raw producer");
    let extra = vec![b'y'; 150_000];
    let headers = OwnedHeaders::new().insert(Header {
        key: "x-attachment",
        value: Some(&extra),
    });
    let record = FutureRecord::to(&h.topics.events)
        .key("ep-down")
        .payload(&value)
        .headers(headers);
    let big_offset = raw.send(record, DEADLINE).await.expect("written").offset;
    let good = event("ep-ok", 2);
    let (_, good_offset) = h.publish_json(&good).await;
    assert!(good_offset > big_offset);

    let dlq = h.dlq(1).await;
    assert_eq!(dlq.len(), 1);
    let (envelope, _) = &dlq[0];
    assert_eq!(envelope.event_id, big.event_id);
    assert_eq!(envelope.error_reason, ErrorReason::PayloadTooLarge);
    assert_eq!(envelope.original_offset, big_offset);
    assert_eq!(envelope.attempts, 1);
    assert_eq!(envelope.last_status_code, Some(503));
    // The 150 KB header leaves no room for the whole value beside it: the payload is cut,
    // and says so.
    assert!(envelope.original_payload_truncated);
    assert_eq!(
        envelope.original_payload_size,
        u64::try_from(value.len()).ok()
    );
    assert!(value.starts_with(&envelope.original_payload_bytes));

    h.wait_for_requests("ok", 1).await;
    let past = wait_until(DEADLINE, "the commit past both records", || async {
        h.committed(&group, 0)
            .filter(|offset| *offset > good_offset)
    })
    .await;
    assert_eq!(past, good_offset + 1);
    assert_eq!(
        h.receiver.count("down"),
        2,
        "the warm-up's, then one attempt, then parked"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_lag_gauge_counts_a_paused_partition() {
    let mut h = harness("lag", &["200ms", "20s"]).await;
    let url = h.receiver.script("ok", |_| Reply::Status(204));
    h.put_endpoint("ep-ok", serde_json::json!({ "url": url }))
        .await;
    h.start(h.config()).await;

    let due_ms = now_ms() + 15_000;
    write_retry(&h, "20s", &event("ep-ok", 1), due_ms).await;
    h.wait_for_metric(PAUSED, 1).await;
    // The gauge is updated every 10 s.
    wait_until(
        Duration::from_secs(12),
        "the lag of the paused partition",
        || async { (h.metric("webhook_consumer_lag") >= 1).then_some(()) },
    )
    .await;
    assert!(now_ms() < due_ms, "the record is still waiting");
    assert_eq!(h.metric(PAUSED), 1, "{}", h.metrics());
    assert_eq!(h.receiver.count("ok"), 0);

    // Once it is delivered and committed, the lag is gone.
    h.wait_for_requests("ok", 1).await;
    wait_until(
        Duration::from_secs(25),
        "no lag after the delivery",
        || async { (h.metric("webhook_consumer_lag") == 0).then_some(()) },
    )
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn revocation_cancels_deliveries_that_did_not_drain() {
    let mut h = harness("revoke", &["500ms"]).await;
    let url = h.receiver.script("slow", |_| Reply::Slow {
        delay_ms: 4_000,
        status: 503,
    });
    h.put_endpoint("ep-slow", serde_json::json!({ "url": url }))
        .await;
    let mut config = h.config();
    config.shutdown_grace_ms = 500;
    config.http.timeout_ms = 10_000;
    config.retry.max_attempts = 2;
    // An eager assignor: B's join revokes A's partition whichever member ends up owning
    // it (KIP-848's assignor may leave a single partition where it is).
    config.group_protocol = hookline_dispatcher::GroupProtocol::Classic;
    config.kafka.properties.insert(
        "partition.assignment.strategy".to_owned(),
        "range".to_owned(),
    );
    let mut second = config.clone();
    config.dispatcher_id = Some("dispatcher-a".to_owned());
    second.dispatcher_id = Some("dispatcher-b".to_owned());
    h.start(config).await;

    let event = event("ep-slow", 1);
    h.publish_json(&event).await;
    h.wait_for_requests("slow", 1).await;
    // B joins while A's first attempt waits on its answer: A's drain times out.
    let stop_b = CancellationToken::new();
    let b = start(second.into_settings().expect("config"), stop_b.clone())
        .await
        .expect("dispatcher B starts");

    let dlq = h.dlq(1).await;
    let parked: Vec<_> = dlq
        .iter()
        .filter(|(envelope, _)| envelope.event_id == event.event_id)
        .collect();
    assert_eq!(parked.len(), 1, "one chain parks it, once");
    assert_eq!(parked[0].0.error_reason, ErrorReason::RetriesExhausted);
    assert_eq!(parked[0].0.attempts, 2);

    // Every attempt number has one retry copy at most: the cancelled attempt wrote none.
    let tier = read_all(&h.kafka, &h.topics.tier_topic("500ms"), 1, DEADLINE).await;
    let mut copies: BTreeMap<String, usize> = BTreeMap::new();
    for copy in &tier {
        assert_eq!(copy.payload(), Some(event.to_json().as_slice()));
        *copies
            .entry(header(copy, ATTEMPT).expect("attempt"))
            .or_default() += 1;
    }
    assert_eq!(copies, BTreeMap::from([("1".to_owned(), 1)]), "{copies:?}");
    // The receiver saw attempt 1 twice (the cancelled one and its redo), then attempt 2.
    let mut seen: Vec<String> = h
        .receiver
        .received("slow")
        .iter()
        .filter_map(|r| r.header("webhook-attempt").map(str::to_owned))
        .collect();
    seen.sort();
    assert_eq!(seen, ["1", "1", "2"]);

    stop_b.cancel();
    b.wait().await.expect("B stops cleanly");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_409_from_a_receiver_still_processing_a_copy_is_retried_not_parked() {
    // hookline-receiver answers 409 to a copy that arrives while the first is still being
    // processed: the sender is to come back later, and the endpoint is not failing.
    let mut h = Harness::new("conflict").await;
    let url = h.receiver.script("busy-copy", |n| {
        if n == 0 {
            Reply::Status(409)
        } else {
            Reply::Status(200)
        }
    });
    h.put_endpoint("ep-busy-copy", serde_json::json!({ "url": url }))
        .await;
    h.start(h.config()).await;
    h.publish_json(&event("ep-busy-copy", 1)).await;
    wait_until(
        DEADLINE,
        "the retry after the 409 is answered 200",
        || async {
            h.metrics()
                .contains(r#"webhook_delivery_total{status="succeeded"} 1"#)
                .then_some(())
        },
    )
    .await;
    assert_eq!(h.receiver.count("busy-copy"), 2, "one 409, one 200");
    assert_eq!(h.metric_sum("webhook_dlq_total"), 0, "nothing parked");
    h.stop().await;
}

/// A record that holds its partition's commit position longer than `max_hold_ms` (here it
/// waits for a registry that is away) is told to move on: it goes to a tier, the commit
/// passes it while the registry is still away, and the tier delivers it once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_record_holding_the_commit_too_long_moves_to_a_tier_and_the_commit_passes_it() {
    let mut h = Harness::new("held").await;
    let ok = h.receiver.script("ok", |_| Reply::Status(204));
    h.put_endpoint("ep-ok", serde_json::json!({ "url": ok }))
        .await;
    let (mut config, proxy) = h.config_behind_registry_proxy().await;
    config.concurrency.max_hold_ms = 1_000;
    let group = config.group_id.clone();
    h.start(config).await;
    proxy.set_down();

    let held = event("ep-ok", 1);
    let (partition, offset) = h.publish_avro(&held).await;
    wait_until(DEADLINE, "the held record deferred to a tier", || async {
        h.metrics()
            .contains(r#"why="registry_unavailable""#)
            .then_some(())
    })
    .await;
    wait_until(DEADLINE, "the commit past the held record", || async {
        h.committed(&group, partition)
            .is_some_and(|committed| committed > offset)
            .then_some(())
    })
    .await;
    assert_eq!(
        h.receiver.count("ok"),
        0,
        "not delivered without its schema"
    );

    proxy.set_up();
    h.wait_for_requests("ok", 1).await;
    assert_eq!(
        h.receiver.received("ok")[0].header("webhook-id"),
        Some(held.event_id.as_str())
    );
    h.stop().await;
}
