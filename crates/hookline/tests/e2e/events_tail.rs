//! `hookline events tail` (the binary) against the real stack: it shows only the new records
//! its filter asks for; and `hookline topics create` gives the attempt log its configured
//! retention and partitions.

use std::process::Stdio;
use std::time::Duration;

use hookline_core::attempt_log::AttemptKind;
use hookline_core::schema::WEBHOOK_ATTEMPT_CURRENT;
use hookline_kafka::{TopicSpec, ensure_topics};
use hookline_testkit::{kafka_settings, registry_settings, unique_name};
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::dlq_cli::{hookline, stderr, stdout};
use crate::events_history::{record, write};

const DEADLINE: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tail_follows_only_the_matching_records() {
    let events = unique_name("evtail");
    let topic = format!("{events}.attempts");
    ensure_topics(&kafka_settings(), &[TopicSpec::new(&topic, 3, 1)])
        .await
        .expect("topic");
    let now = hookline_dlq::filter::now_ms();
    // Written before the tail starts: not shown.
    write(
        &topic,
        WEBHOOK_ATTEMPT_CURRENT,
        &[record(
            "evt-before",
            AttemptKind::Attempt,
            now,
            "ep-a",
            "acme",
        )],
    )
    .await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(["--bootstrap-servers", &kafka_settings().bootstrap_servers])
        .args([
            "--registry-url",
            &registry_settings().url,
            "--events-topic",
            &events,
        ])
        .args([
            "events",
            "tail",
            "--endpoint",
            "ep-a",
            "--tenant",
            "acme",
            "--output",
            "json",
        ])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the tail starts");
    let mut err = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let started = tokio::time::timeout(DEADLINE, err.next_line())
        .await
        .expect("the tail says it follows")
        .expect("stderr");
    assert!(started.is_some_and(|l| l.starts_with("following")));
    write(
        &topic,
        WEBHOOK_ATTEMPT_CURRENT,
        &[
            record("evt-1", AttemptKind::Attempt, now, "ep-a", "acme"),
            record("evt-2", AttemptKind::Attempt, now, "ep-b", "acme"),
            record("evt-3", AttemptKind::Attempt, now, "ep-a", "globex"),
            record("evt-4", AttemptKind::Parked, now, "ep-a", "acme"),
            record("evt-5", AttemptKind::Attempt, now, "ep-a", "acme"),
        ],
    )
    .await;
    let mut out = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let line = tokio::time::timeout(DEADLINE, out.next_line())
            .await
            .expect("a line before the deadline")
            .expect("stdout")
            .expect("the tail still runs");
        let json: Value = serde_json::from_str(&line).expect("a JSON line");
        assert_eq!(json["endpoint_id"], "ep-a", "{line}");
        assert_eq!(json["tenant_id"], "acme", "{line}");
        seen.push(json["event_id"].as_str().expect("id").to_owned());
    }
    seen.sort();
    assert_eq!(seen, ["evt-1", "evt-4", "evt-5"]);
    child.kill().await.expect("stop the tail");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn topics_create_gives_the_attempt_log_its_configured_retention() {
    let events = unique_name("evret");
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("dispatcher.toml");
    std::fs::write(&config, "[attempts]\nretention_ms = 3600000\n").expect("config");
    let out = hookline(
        &events,
        &[
            "--endpoints-topic",
            &format!("{events}-endpoints"),
            "topics",
            "create",
            "--partitions",
            "3",
            "--config",
            config.to_str().expect("a UTF-8 path"),
        ],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let topic = format!("{events}.attempts");
    assert!(
        stdout(&out).contains(&format!("created {topic}")),
        "{}",
        stdout(&out)
    );
    let admin: AdminClient<DefaultClientContext> =
        kafka_settings().client_config().create().expect("admin");
    let described = admin
        .describe_configs(&[ResourceSpecifier::Topic(&topic)], &AdminOptions::new())
        .await
        .expect("describe");
    let resource = described
        .into_iter()
        .next()
        .expect("one resource")
        .expect("described");
    let retention = resource.get("retention.ms").and_then(|e| e.value.clone());
    assert_eq!(retention.as_deref(), Some("3600000"));
    let consumer: BaseConsumer = kafka_settings().client_config().create().expect("client");
    let metadata = consumer
        .fetch_metadata(Some(&topic), DEADLINE)
        .expect("metadata");
    assert_eq!(
        metadata.topics()[0].partitions().len(),
        3,
        "as many as --partitions"
    );
}
