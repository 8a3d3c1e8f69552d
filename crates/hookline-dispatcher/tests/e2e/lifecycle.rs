//! Endpoint lifecycle on the real stack: an endpoint that answers 410 is disabled at once,
//! one that fails every attempt for `disable_after_failing_ms` is disabled, both written
//! back to the endpoints topic with why and when; later events are parked
//! `endpoint_disabled` without an attempt.

use hookline_core::endpoint::EndpointConfig;
use hookline_core::envelope::ErrorReason;
use hookline_producer::EndpointStore;
use hookline_testkit::{Reply, wait_until};

use crate::harness::{DEADLINE, Harness, event};

/// Waits until the endpoints topic holds `id` disabled, and returns that config.
async fn disabled_in_topic(h: &Harness, id: &str) -> EndpointConfig {
    let store = EndpointStore::new(&h.kafka, &h.topics.endpoints).expect("store");
    wait_until(DEADLINE, &format!("{id} disabled in the topic"), || async {
        store
            .get(id)
            .await
            .ok()
            .flatten()
            .filter(|config| !config.enabled)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_endpoint_answering_gone_is_disabled_at_once_and_later_events_are_parked() {
    let mut h = Harness::new("lc-gone").await;
    let gone = h.receiver.script("gone", |_| Reply::Status(410));
    h.put_endpoint(
        "ep-gone",
        serde_json::json!({ "url": gone, "description": "orders" }),
    )
    .await;
    h.start(h.config()).await;

    h.publish_json(&event("ep-gone", 1)).await;
    let config = disabled_in_topic(&h, "ep-gone").await;
    assert_eq!(config.disabled_reason.as_deref(), Some("gone: HTTP 410"));
    assert!(config.disabled_at_ms.is_some_and(|at| at > 0), "{config:?}");
    assert_eq!(
        config.description.as_deref(),
        Some("orders"),
        "the rest kept"
    );
    assert_eq!(config.url, gone);

    // The dispatcher's own table reads it back.
    h.wait_for_metric("webhook_endpoints_disabled", 1).await;
    assert_eq!(
        h.metric("webhook_endpoint_disabled_total{reason=\"gone\"}"),
        1
    );

    h.publish_json(&event("ep-gone", 2)).await;
    let dlq = h.dlq(2).await;
    let reasons: Vec<ErrorReason> = dlq.iter().map(|(e, _)| e.error_reason).collect();
    assert_eq!(
        reasons,
        [
            ErrorReason::NonRetryableStatus,
            ErrorReason::EndpointDisabled
        ]
    );
    assert_eq!(h.receiver.count("gone"), 1, "exactly one attempt");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_endpoint_failing_past_the_limit_is_disabled_keeping_a_newer_config() {
    let mut h = Harness::new("lc-failing").await;
    let failing = h.receiver.script("failing", |_| Reply::Status(500));
    h.put_endpoint(
        "ep-fail",
        serde_json::json!({ "url": failing, "description": "v1" }),
    )
    .await;
    let mut config = h.config();
    config.retry.max_attempts = 20;
    config.lifecycle.disable_after_failing_ms = 600;
    h.start(config).await;

    h.publish_json(&event("ep-fail", 1)).await;
    h.wait_for_requests("failing", 1).await;
    // A newer config written while it fails: the disable is made on it and keeps it.
    h.put_endpoint(
        "ep-fail",
        serde_json::json!({ "url": failing, "description": "v2", "timeout_ms": 1500 }),
    )
    .await;

    let config = disabled_in_topic(&h, "ep-fail").await;
    assert_eq!(config.disabled_reason.as_deref(), Some("failing: HTTP 500"));
    assert_eq!(config.description.as_deref(), Some("v2"));
    assert_eq!(config.timeout_ms, Some(1500));
    h.wait_for_metric("webhook_endpoints_disabled", 1).await;
    assert_eq!(
        h.metric("webhook_endpoint_disabled_total{reason=\"failing\"}"),
        1
    );
    assert!(
        h.receiver.count("failing") >= 2,
        "failed more than once first"
    );
    h.stop().await;
}
