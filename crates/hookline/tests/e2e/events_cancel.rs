//! `hookline events cancel` against the real stack and a running `hookline dispatch`: an
//! event waiting in a retry tier is cancelled from the command line, the dispatcher parks
//! it `cancelled` without another attempt, and `dlq inspect --reason cancelled` shows it.

use std::collections::BTreeMap;
use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_testkit::{Receiver, Reply, TestTopics, kafka_settings, read_all, unique_name};
use rdkafka::producer::{FutureProducer, FutureRecord};

use crate::dispatch::dispatcher;
use crate::dlq_cli::{hookline, stderr, stdout};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DEADLINE: Duration = Duration::from_secs(90);

/// Runs `hookline` with this test's events and endpoints topics.
async fn run(topics: &TestTopics, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--endpoints-topic", topics.endpoints.as_str()];
    all.extend_from_slice(args);
    hookline(&topics.events, &all).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_event_is_parked_and_dlq_inspect_finds_it_by_reason() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("evcancel", &["200ms", "3s"]);
    topics.create(&kafka, 1).await;
    let actions = format!("{}.dlq-actions", topics.events);
    hookline_kafka::ensure_topics(&kafka, &[hookline_kafka::TopicSpec::new(&actions, 1, 1)])
        .await
        .expect("the DLQ actions topic");
    let receiver = Receiver::start().await;
    let url = receiver.script("orders", |_| Reply::Status(503));
    let producer: FutureProducer = kafka.producer_config().create().expect("producer");
    let endpoint = serde_json::json!({ "url": url, "secrets": [SECRET] }).to_string();
    producer
        .send(
            FutureRecord::to(&topics.endpoints)
                .key("ep-orders")
                .payload(&endpoint),
            DEADLINE,
        )
        .await
        .expect("endpoint written");

    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("dispatcher.toml");
    std::fs::write(
        &config,
        format!(
            "group_id = \"{}\"\n\n[topics]\nretry_tiers = [{}]\n\n[retry]\nstrategy = \"fixed\"\nbase_ms = 3000\ncap_ms = 3000\n\n[outbound]\nallow_loopback = true\n\n[admin]\nlisten = \"127.0.0.1:0\"\n",
            unique_name("evcancel-group"),
            topics.tiers_toml()
        ),
    )
    .expect("config file");
    let mut child = dispatcher("evcancel", &topics, &config, dir.path());

    let event = WebhookEvent {
        event_id: unique_name("order-paid"),
        event_type: "order.paid".to_owned(),
        endpoint_id: Some("ep-orders".to_owned()),
        tenant_id: None,
        channels: Vec::new(),
        endpoint_url: None,
        payload: br#"{"order":42}"#.to_vec(),
        content_type: "application/json".to_owned(),
        headers: BTreeMap::new(),
        created_at_ms: 0,
        expires_at_ms: None,
    };
    producer
        .send(
            FutureRecord::to(&topics.events)
                .key("ep-orders")
                .payload(&event.to_json()),
            DEADLINE,
        )
        .await
        .expect("event written");
    hookline_testkit::wait_until(DEADLINE, "the first attempt", || async {
        (receiver.count("orders") >= 1).then_some(())
    })
    .await;

    // The retry now waits about 3 s in the 3s tier.
    let cancel = run(
        &topics,
        &[
            "events",
            "cancel",
            &event.event_id,
            "--reason",
            "order refunded",
        ],
    )
    .await;
    assert!(cancel.status.success(), "{}", stderr(&cancel));
    let printed = stdout(&cancel);
    assert!(
        printed.starts_with(&format!("cancelled {} (every delivery)", event.event_id)),
        "{printed}"
    );
    assert!(printed.contains(&topics.cancellations), "{printed}");

    let dlq = read_all(&kafka, &topics.dlq, 1, DEADLINE).await;
    assert_eq!(dlq.len(), 1);
    let inspect = run(&topics, &["dlq", "inspect", "--reason", "cancelled"]).await;
    assert!(inspect.status.success(), "{}", stderr(&inspect));
    let lines: Vec<serde_json::Value> = stdout(&inspect)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["event_id"], event.event_id.as_str());
    assert_eq!(lines[0]["error_reason"], "cancelled");
    assert_eq!(lines[0]["attempts"], 1);
    let message = lines[0]["error_message"].as_str().unwrap_or_default();
    assert!(
        message.contains("by cli-tester (order refunded)"),
        "{message}"
    );
    let expired = run(&topics, &["dlq", "inspect", "--reason", "expired"]).await;
    assert!(expired.status.success(), "{}", stderr(&expired));
    assert_eq!(stdout(&expired).trim(), "", "nothing expired");

    child.kill().await.expect("stop the dispatcher");
    assert_eq!(receiver.count("orders"), 1, "no attempt after the cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_refuses_a_missing_topic_and_a_bad_event_id_naming_the_field() {
    let events = unique_name("evcancel-missing");
    let missing = hookline(&events, &["events", "cancel", "evt_1"]).await;
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains(&format!("topic {events}.cancellations does not exist")),
        "{}",
        stderr(&missing)
    );
    let dotted = hookline(&events, &["events", "cancel", "evt.1"]).await;
    assert!(!dotted.status.success());
    assert!(
        stderr(&dotted).contains("`event_id`"),
        "{}",
        stderr(&dotted)
    );
    // A deadline already past is refused by the publisher, before anything is sent.
    let late = hookline(
        &events,
        &[
            "publish",
            "--endpoint",
            "ep",
            "--type",
            "order.paid",
            "--data",
            "{}",
            "--encoding",
            "json",
            "--expires-at",
            "2020-01-01T00:00:00Z",
        ],
    )
    .await;
    assert!(!late.status.success());
    assert!(
        stderr(&late).contains("expires_at") && stderr(&late).contains("nothing was sent"),
        "{}",
        stderr(&late)
    );
}
