//! `hookline endpoints disable` / `enable` against the real stack and a running
//! `hookline dispatch`: a disabled endpoint's events are parked `endpoint_disabled`, the
//! listing says why, and once enabled a `dlq redrive` delivers the parked record.

use std::collections::BTreeMap;
use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_testkit::{
    Receiver, Reply, TestTopics, kafka_settings, read_all, unique_name, wait_until,
};
use rdkafka::producer::{FutureProducer, FutureRecord};

use crate::dispatch::dispatcher;
use crate::dlq_cli::{hookline, stderr, stdout};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DEADLINE: Duration = Duration::from_secs(90);

fn event(id: &str) -> WebhookEvent {
    WebhookEvent {
        event_id: id.to_owned(),
        event_type: "invoice.paid".to_owned(),
        endpoint_id: Some("ep-x".to_owned()),
        tenant_id: None,
        channels: Vec::new(),
        endpoint_url: None,
        payload: br#"{"invoice":1}"#.to_vec(),
        content_type: "application/json".to_owned(),
        headers: BTreeMap::new(),
        created_at_ms: 0,
        expires_at_ms: None,
    }
}

async fn publish(producer: &FutureProducer, topic: &str, event: &WebhookEvent) {
    producer
        .send(
            FutureRecord::to(topic)
                .key("ep-x")
                .payload(&event.to_json()),
            DEADLINE,
        )
        .await
        .expect("event written");
}

/// Runs `hookline` with this test's events and endpoints topics.
async fn run(topics: &TestTopics, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--endpoints-topic", topics.endpoints.as_str()];
    all.extend_from_slice(args);
    hookline(&topics.events, &all).await
}

async fn wait_delivered(receiver: &Receiver, id: &str) {
    wait_until(DEADLINE, &format!("{id} delivered"), || async {
        receiver
            .received("ok")
            .iter()
            .any(|r| r.header("webhook-id") == Some(id))
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn disable_lists_why_and_enable_then_redrive_delivers_the_parked_record() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("eplife", &["200ms", "1s"]);
    topics.create(&kafka, 2).await;
    let actions = format!("{}.dlq-actions", topics.events);
    hookline_kafka::ensure_topics(&kafka, &[hookline_kafka::TopicSpec::new(&actions, 1, 1)])
        .await
        .expect("the DLQ actions topic");
    let receiver = Receiver::start().await;
    let url = receiver.script("ok", |_| Reply::Status(200));
    let producer: FutureProducer = kafka.producer_config().create().expect("producer");
    let endpoint = serde_json::json!({ "url": url, "secrets": [SECRET] }).to_string();
    producer
        .send(
            FutureRecord::to(&topics.endpoints)
                .key("ep-x")
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
            "group_id = \"{}\"\n\n[topics]\nretry_tiers = [{}]\n\n[retry]\nbase_ms = 200\ncap_ms = 1000\n\n[outbound]\nallow_loopback = true\n\n[admin]\nlisten = \"127.0.0.1:0\"\n",
            unique_name("eplife-group"),
            topics.tiers_toml()
        ),
    )
    .expect("config file");
    let off = run(
        &topics,
        &[
            "endpoints",
            "disable",
            "ep-x",
            "--reason",
            "receiver moving",
        ],
    )
    .await;
    assert!(off.status.success(), "{}", stderr(&off));
    let list = run(&topics, &["endpoints", "list"]).await;
    assert!(
        stdout(&list).contains("disabled (manual: receiver moving, 20"),
        "{}",
        stdout(&list)
    );
    let json = run(&topics, &["endpoints", "list", "--output", "json"]).await;
    let json: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("JSON");
    assert_eq!(json[0]["enabled"], false);
    assert_eq!(json[0]["disabled_reason"], "manual: receiver moving");
    assert!(json[0]["disabled_at_ms"].as_i64().is_some_and(|at| at > 0));

    let mut child = dispatcher("eplife", &topics, &config, dir.path());
    let parked = event(&unique_name("parked"));
    publish(&producer, &topics.events, &parked).await;
    let dlq = read_all(&kafka, &topics.dlq, 1, DEADLINE).await;
    assert_eq!(dlq.len(), 1);
    assert_eq!(receiver.count("ok"), 0, "no attempt while disabled");

    let on = run(&topics, &["endpoints", "enable", "ep-x"]).await;
    assert!(on.status.success(), "{}", stderr(&on));
    let list = run(&topics, &["endpoints", "list", "--output", "json"]).await;
    let json: serde_json::Value = serde_json::from_str(&stdout(&list)).expect("JSON");
    assert_eq!(json[0]["enabled"], true);
    assert!(json[0].get("disabled_reason").is_none(), "{json}");
    // The dispatcher has read the change once a new event gets through.
    let probe = event(&unique_name("probe"));
    publish(&producer, &topics.events, &probe).await;
    wait_delivered(&receiver, &probe.event_id).await;

    let redrive = run(&topics, &["dlq", "redrive", "--endpoint", "ep-x"]).await;
    assert!(redrive.status.success(), "{}", stderr(&redrive));
    wait_delivered(&receiver, &parked.event_id).await;
    child.kill().await.expect("stop the dispatcher");
}
