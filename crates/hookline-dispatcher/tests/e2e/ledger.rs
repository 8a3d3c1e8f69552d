//! End-to-end tests of the delivery ledger: the real local stack (broker and registry from
//! `deploy/local/stack up`), a real HTTP receiver on 127.0.0.1:0, and a real `redis-server`
//! started by each test on a free loopback port (installed by `deploy/setup`).

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_dispatcher::{DispatchError, DispatcherConfig, start};
use hookline_testkit::{RedisServer, Reply, wait_until};

use crate::harness::{DEADLINE, Harness, event};

const PREFIX: &str = "hookline:delivered:";

/// The common harness with a Redis of the test's own for the ledger.
struct LedgerHarness {
    inner: Harness,
    redis: RedisServer,
}

impl Deref for LedgerHarness {
    type Target = Harness;

    fn deref(&self) -> &Harness {
        &self.inner
    }
}

impl DerefMut for LedgerHarness {
    fn deref_mut(&mut self) -> &mut Harness {
        &mut self.inner
    }
}

impl LedgerHarness {
    async fn new(test: &str) -> LedgerHarness {
        LedgerHarness {
            inner: Harness::new(test).await,
            redis: RedisServer::start().await,
        }
    }

    /// The common configuration with the ledger on the test's Redis; each call is a new
    /// consumer group, which reads the topics from the beginning.
    fn config(&self) -> DispatcherConfig {
        let mut config = self.inner.config();
        config.ledger.redis_url = Some(self.redis.url());
        config.ledger.ttl_s = 3_600;
        config.ledger.timeout_ms = 300;
        config
    }

    async fn start(&mut self, config: DispatcherConfig) {
        self.inner.start(config).await;
    }

    async fn put_endpoint(&self, id: &str, url: &str) {
        self.inner
            .put_endpoint(id, serde_json::json!({ "url": url }))
            .await;
    }

    /// Publishes one record of `event` (a second call publishes a second record).
    async fn publish(&self, event: &WebhookEvent) {
        self.inner.publish_json(event).await;
    }
}

const DELIVERED: &str = r#"webhook_delivery_total{status="succeeded"}"#;
const SUPPRESSED: &str = r#"webhook_delivery_total{status="duplicate_suppressed"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_record_of_a_delivered_event_is_not_delivered_again() {
    let mut h = LedgerHarness::new("ledger-dup").await;
    let url = h.receiver.script("dup", |_| Reply::Status(204));
    h.put_endpoint("ep-dup", &url).await;
    h.start(h.config()).await;

    let event = event("ep-dup", 1);
    h.publish(&event).await;
    h.wait_for_metric(DELIVERED, 1).await;
    let key = format!("{PREFIX}6:ep-dup:{}", event.event_id);
    let remembered: Option<String> = h.redis.query(redis::cmd("GET").arg(&key)).await;
    let remembered = remembered.expect("the delivery is in the ledger");
    assert!(
        remembered.contains('/'),
        "<dispatcher id>/<ms>: {remembered}"
    );
    let ttl: i64 = h.redis.query(redis::cmd("TTL").arg(&key)).await;
    assert!((1..=3_600).contains(&ttl), "remembered for ttl_s: {ttl}");

    // The producer publishes the same event again (a retried send, a replay).
    h.publish(&event).await;
    h.wait_for_metric(SUPPRESSED, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let received = h.receiver.received("dup");
    assert_eq!(received.len(), 1, "delivered once");
    assert_eq!(
        received[0].header("webhook-id"),
        Some(event.event_id.as_str())
    );
    assert_eq!(h.metric(DELIVERED), 1, "{}", h.metrics());
    assert_eq!(h.metric(SUPPRESSED), 1, "{}", h.metrics());
    assert_eq!(h.metric_sum("webhook_ledger_errors_total"), 0);

    // Another event to the same endpoint is not held back by the first one's key.
    let other = self::event("ep-dup", 2);
    h.publish(&other).await;
    h.wait_for_requests("dup", 2).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_consumer_group_replaying_the_topic_delivers_nothing_again() {
    let mut h = LedgerHarness::new("ledger-replay").await;
    let url = h.receiver.script("replay", |_| Reply::Status(200));
    h.put_endpoint("ep-replay", &url).await;
    h.start(h.config()).await;
    let events: Vec<_> = (0..5).map(|n| event("ep-replay", n)).collect();
    for event in &events {
        h.publish(event).await;
    }
    h.wait_for_requests("replay", 5).await;
    h.wait_for_metric(DELIVERED, 5).await;
    let laned = h.metric_sum("webhook_deferrals_total");
    h.stop().await;

    // A new group has no committed offsets: it reads every record again, the copies the
    // first group sent through the slow lane (the endpoint was new to it) as well.
    h.start(h.config()).await;
    h.wait_for_metric(SUPPRESSED, 5 + laned).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.receiver.count("replay"), 5, "nothing delivered again");
    assert_eq!(h.metric(DELIVERED), 0, "{}", h.metrics());
    let totals = h.running.as_ref().expect("running").metrics().totals();
    assert!(totals.duplicates_suppressed >= 5, "{}", h.metrics());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deliveries_go_on_without_redis_and_the_ledger_comes_back_with_it() {
    let mut h = LedgerHarness::new("ledger-down").await;
    let url = h.receiver.script("down", |_| Reply::Status(202));
    h.put_endpoint("ep-down", &url).await;
    h.start(h.config()).await;
    let first = event("ep-down", 0);
    h.publish(&first).await;
    h.wait_for_metric(DELIVERED, 1).await;

    h.redis.stop();
    let during: Vec<_> = (1..=4).map(|n| event("ep-down", n)).collect();
    for event in &during {
        h.publish(event).await;
    }
    // At-least-once without the ledger's help: each is delivered, and each failed EXISTS
    // and SET is counted.
    h.wait_for_requests("down", 5).await;
    h.wait_for_metric(DELIVERED, 5).await;
    let errors = h.metric_sum("webhook_ledger_errors_total");
    assert!(errors >= 4, "{}", h.metrics());
    assert!(
        h.metrics()
            .contains(r#"webhook_ledger_errors_total{store="redis",op="EXISTS"}"#),
        "{}",
        h.metrics()
    );
    assert_eq!(h.metric_sum("webhook_dlq_total"), 0, "{}", h.metrics());
    assert_eq!(h.metric_sum("webhook_retries_total"), 0, "{}", h.metrics());

    // Redis back (empty: it kept nothing): the same connection manager reconnects, and a
    // delivery made now is remembered again, so its next copy is suppressed.
    h.redis.restart().await;
    let mut n = 100;
    let remembered = wait_until(DEADLINE, "the ledger to remember a delivery again", || {
        n += 1;
        let fresh = event("ep-down", n);
        let h = &h;
        async move {
            h.publish(&fresh).await;
            let key = format!("{PREFIX}7:ep-down:{}", fresh.event_id);
            for _ in 0..50 {
                let known: u64 = h.redis.query(redis::cmd("EXISTS").arg(&key)).await;
                if known == 1 {
                    return Some(fresh);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            None
        }
    })
    .await;
    h.publish(&remembered).await;
    h.wait_for_metric(SUPPRESSED, 1).await;
    let copies = h
        .receiver
        .received("down")
        .iter()
        .filter(|r| r.header("webhook-id") == Some(remembered.event_id.as_str()))
        .count();
    assert_eq!(copies, 1, "the remembered event was delivered once");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn start_up_fails_when_the_configured_ledger_does_not_answer() {
    let mut h = LedgerHarness::new("ledger-absent").await;
    let url = h.redis.url();
    h.redis.stop();
    let settings = h.config().into_settings().expect("valid config");
    let error = start(settings, h.shutdown.clone())
        .await
        .err()
        .expect("start-up refused");
    assert!(matches!(error, DispatchError::Ledger { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("ledger.redis_url") && message.contains(&url),
        "{message}"
    );
    h.shutdown.cancel();
}
