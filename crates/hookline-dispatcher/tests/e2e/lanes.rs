//! The slow lane: a slow endpoint's records that find no room go to `<events>.lane` at once,
//! keyed by their endpoint, without an attempt; the records behind them flow; they come back
//! from the lane for their endpoint's turn and are delivered once each, as first attempts.
//! A strict-ordering endpoint's records always wait there, in order.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use hookline_testkit::{Reply, read_all, wait_until};
use rdkafka::Message;
use rdkafka::message::Headers;
use serde_json::json;

use crate::harness::{DEADLINE, Harness, event};
use crate::isolation::{events, metric_with, publish_all};

const DEFERRED: &str = "webhook_deferrals_total";

/// Before: the slow endpoint's records took every place and permit they could and waited
/// for them; the fast events behind them on the partition waited for its backlog (or for
/// records to give way a second later, to a tier, again and again).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_endpoints_records_wait_in_the_lane_and_come_back_once_each_as_first_attempts() {
    let mut h = Harness::new("lane").await;
    let slow = h.receiver.script("slow", |_| Reply::Slow {
        delay_ms: 800,
        status: 204,
    });
    let fast = h.receiver.script("fast", |_| Reply::Status(204));
    h.put_endpoint("ep-slow", json!({ "url": slow })).await;
    h.put_endpoint("ep-fast", json!({ "url": fast })).await;
    let mut config = h.config();
    // Slow past 300 ms; slow endpoints share 2 attempts; one at a time per endpoint.
    config.concurrency.slow_after_ms = 300;
    config.concurrency.max_in_flight = 4;
    config.concurrency.per_endpoint = 1;
    let group = config.group_id.clone();
    h.start(config).await;

    // Their first answers show one fast, the other slow.
    publish_all(&h, &events("ep-fast", 1), Some(0)).await;
    publish_all(&h, &events("ep-slow", 3), Some(0)).await;
    h.wait_for_metric(r#"webhook_delivery_total{status="succeeded"}"#, 4)
        .await;
    // One partition: the fast events come after the slow backlog, as a log has them.
    publish_all(&h, &events("ep-slow", 20), Some(0)).await;
    publish_all(&h, &events("ep-fast", 20), Some(0)).await;
    // The slow endpoint alone needs 20 x 800 ms = 16 s for its backlog.
    let started = Instant::now();
    wait_until(DEADLINE, "the fast endpoint's 20 deliveries", || async {
        (h.receiver.count("fast") >= 21).then_some(())
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the fast events waited {:?} behind the slow backlog",
        started.elapsed()
    );
    let laned = metric_with(&h, DEFERRED, r#"tier="lane""#);
    assert!(laned > 0, "the slow records went to the lane");
    assert_eq!(
        metric_with(&h, DEFERRED, "why="),
        laned,
        "none went round a tier"
    );

    wait_until(DEADLINE, "every slow event delivered", || async {
        (h.receiver.count("slow") >= 23).then_some(())
    })
    .await;
    // Each event once, and each as its first attempt: a deferral is not an attempt.
    let received = h.receiver.received("slow");
    let mut seen: HashMap<String, usize> = HashMap::new();
    for request in &received {
        let id = request.header("webhook-id").expect("webhook-id").to_owned();
        *seen.entry(id).or_default() += 1;
        assert_eq!(
            request.header("webhook-attempt"),
            Some("1"),
            "a first attempt"
        );
    }
    assert_eq!(seen.len(), 23, "every slow event");
    assert!(seen.values().all(|n| *n == 1), "each once: {seen:?}");

    // The lane holds them keyed by their endpoint, with their retry state.
    let lane = format!("{}.lane", h.topics.events);
    let records = read_all(&h.kafka, &lane, laned as usize, DEADLINE).await;
    // The slow endpoint's, keyed by it (and the two warm-ups, sent there while their
    // endpoints were new).
    let slow_ones = records
        .iter()
        .filter(|r| r.key() == Some(b"ep-slow".as_slice()))
        .count();
    assert!(slow_ones + 2 >= records.len(), "keyed by endpoint");
    // The main topic's commit passed the records sent to the lane.
    wait_until(DEADLINE, "the main topic committed to its end", || async {
        (h.committed(&group, 0) == Some(44)).then_some(())
    })
    .await;
    h.stop().await;
}

/// A record whose key is not its endpoint's id is admitted without its endpoint's standing;
/// once its endpoint (new) sends it to the lane, it waits its turn there, and is not sent
/// round the lane again (it was, for ever, while no attempt could show the endpoint fast).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_record_keyed_by_something_else_goes_to_the_lane_once_and_is_delivered() {
    let mut h = Harness::new("lane-key").await;
    let url = h.receiver.script("ok", |_| Reply::Status(204));
    h.put_endpoint("ep-ok", json!({ "url": url })).await;
    h.start(h.config()).await;
    let events = events("ep-ok", 5);
    for (n, event) in events.iter().enumerate() {
        h.publish_bytes(
            &format!("order-{n}"),
            &event.to_json(),
            Some(&event.event_id),
        )
        .await;
    }
    h.wait_for_requests("ok", 5).await;
    let laned = metric_with(&h, DEFERRED, r#"tier="lane""#);
    assert!(laned <= 5, "each at most once into the lane: {laned}");
    h.stop().await;
}

/// Before: a strict-ordering endpoint's records waited in their chain on the events topic,
/// and its full chain paused the partition, so the endpoints sharing it waited for the
/// strict endpoint's backlog and retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_strict_endpoints_records_keep_their_order_through_the_lane_and_others_flow() {
    let mut h = Harness::new("lane-strict").await;
    // Fails twice (retried in place), then answers slowly.
    let strict = h.receiver.script("strict", |n| {
        if n < 2 {
            Reply::Status(503)
        } else {
            Reply::Slow {
                delay_ms: 100,
                status: 204,
            }
        }
    });
    let fast = h.receiver.script("fast", |_| Reply::Status(204));
    let ordered =
        json!({ "url": strict, "strict_ordering": true, "retry": { "max_attempts": 10 } });
    h.put_endpoint("ep-strict", ordered).await;
    h.put_endpoint("ep-fast", json!({ "url": fast })).await;
    let mut config = h.config();
    config.concurrency.per_endpoint_queue = 4;
    let group = config.group_id.clone();
    h.start(config).await;
    publish_all(&h, &events("ep-fast", 1), Some(0)).await;
    h.wait_for_requests("fast", 1).await;

    // One partition, the two endpoints' events interleaved.
    let strict_events = events("ep-strict", 20);
    let fast_events: Vec<_> = (1..=40).map(|n| event("ep-fast", n)).collect();
    let mut mixed = Vec::new();
    for (n, strict_event) in strict_events.iter().enumerate() {
        mixed.push(strict_event.clone());
        mixed.extend_from_slice(&fast_events[2 * n..2 * n + 2]);
    }
    publish_all(&h, &mixed, Some(0)).await;
    // The strict endpoint needs two retries and 20 x 100 ms; the fast one does not wait.
    wait_until(DEADLINE, "the fast endpoint's 40 deliveries", || async {
        (h.receiver.count("fast") >= 41).then_some(())
    })
    .await;
    // Not paced by the strict endpoint's chain: done before half of its events.
    let strict_so_far = h.receiver.count("strict");
    assert!(
        strict_so_far <= 12,
        "the fast events waited for the strict backlog ({strict_so_far} strict requests first)"
    );

    wait_until(DEADLINE, "every strict event delivered", || async {
        (h.receiver.count("strict") >= 22).then_some(())
    })
    .await;
    // Delivered in order: each request is for the event due next, or the one before again.
    let ids: Vec<String> = h
        .receiver
        .received("strict")
        .iter()
        .filter_map(|r| r.header("webhook-id").map(str::to_owned))
        .collect();
    let mut first_seen = ids.clone();
    first_seen.dedup();
    let published: Vec<String> = strict_events.iter().map(|e| e.event_id.clone()).collect();
    assert_eq!(first_seen, published, "in publish order: {ids:?}");

    // They went to the lane without an attempt, for this reason, in order, keyed by their
    // endpoint; and the events topic committed past them.
    let why = r#"why="strict_ordering""#;
    assert_eq!(metric_with(&h, DEFERRED, why), 20);
    let lane = format!("{}.lane", h.topics.events);
    let all_laned = metric_with(&h, DEFERRED, r#"tier="lane""#) as usize;
    let records = read_all(&h.kafka, &lane, all_laned, DEADLINE).await;
    let laned: Vec<String> = records
        .iter()
        .filter(|r| r.key() == Some(b"ep-strict".as_slice()))
        .filter_map(|r| {
            let headers = r.headers()?;
            let id = headers.iter().find(|h| h.key == "webhook-id")?.value?;
            Some(String::from_utf8_lossy(id).into_owned())
        })
        .collect();
    assert_eq!(laned, published, "written to the lane in order");
    wait_until(
        DEADLINE,
        "the events topic committed to its end",
        || async { (h.committed(&group, 0) == Some(61)).then_some(()) },
    )
    .await;
    h.stop().await;
}
