//! `hookline events show` (the binary) against the real stack: the story of an event
//! retried, parked, redriven and delivered across two dispatchers, and of a tenant event
//! with its deliveries; a lookup reads one partition; v1 records still read.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_core::attempt_log::{AttemptKind, AttemptRecord, partition_for};
use hookline_core::schema::{WEBHOOK_ATTEMPT_CURRENT, WEBHOOK_ATTEMPT_V1};
use hookline_kafka::{Registry, TopicSpec, ensure_topics};
use hookline_testkit::{
    Reply, TestTopics, kafka_settings, registry_settings, unique_name, wait_until,
};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::Value;

use crate::dispatch::{dispatcher, terminate};
use crate::dlq_cli::{hookline, stderr, stdout};

const DEADLINE: Duration = Duration::from_secs(90);
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

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

fn config_file(dir: &Path, name: &str, group: &str, topics: &TestTopics) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "group_id = \"{group}\"\ndispatcher_id = \"{name}\"\n\n[topics]\nretry_tiers = [{}]\n\n\
             [retry]\nbase_ms = 200\ncap_ms = 200\nmax_attempts = 2\n\n[outbound]\nallow_loopback = true\n\n\
             [admin]\nlisten = \"127.0.0.1:0\"\n\n[attempts]\nmax_body_excerpt_bytes = 64\n",
            topics.tiers_toml()
        ),
    )
    .expect("config file");
    path
}

/// Runs `hookline events show` with this test's topics.
async fn show(topics: &TestTopics, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "--endpoints-topic",
        topics.endpoints.as_str(),
        "events",
        "show",
    ];
    all.extend_from_slice(args);
    hookline(&topics.events, &all).await
}

fn step_names(json: &Value) -> Vec<String> {
    json["steps"]
        .as_array()
        .map(|steps| {
            steps
                .iter()
                .map(|s| s["step"].as_str().unwrap_or("?").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn show_tells_a_retried_parked_redriven_delivered_event_across_two_dispatchers() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("evhist", &["200ms"]);
    topics.create(&kafka, 2).await;
    let actions = format!("{}.dlq-actions", topics.events);
    ensure_topics(&kafka, &[TopicSpec::new(&actions, 1, 1)])
        .await
        .expect("the DLQ actions topic");
    let receiver = hookline_testkit::Receiver::start().await;
    let url = receiver.script("flaky", |n| {
        if n < 2 {
            Reply::Body {
                status: 500,
                body: format!(
                    "upstream down; see https://status.example/x?token=s3cr3t-77 {}",
                    "x".repeat(500)
                ),
            }
        } else {
            Reply::Body {
                status: 200,
                body: "accepted".to_owned(),
            }
        }
    });
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
    let group = unique_name("evhist-group");

    // Dispatcher A: two failed attempts (a retry through the 200ms tier), then the DLQ.
    let mut a = dispatcher(
        "disp-a",
        &topics,
        &config_file(dir.path(), "disp-a", &group, &topics),
        dir.path(),
    );
    let id = unique_name("evt");
    producer
        .send(
            FutureRecord::to(&topics.events)
                .key("ep-x")
                .payload(&event(&id).to_json()),
            DEADLINE,
        )
        .await
        .expect("event written");
    hookline_testkit::read_all(&kafka, &topics.dlq, 1, DEADLINE).await;
    assert!(
        terminate(&mut a).await.success(),
        "dispatcher A stops cleanly"
    );

    // Dispatcher B (same group) delivers the redrive.
    let mut b = dispatcher(
        "disp-b",
        &topics,
        &config_file(dir.path(), "disp-b", &group, &topics),
        dir.path(),
    );
    let redrive = hookline(
        &topics.events,
        &[
            "--endpoints-topic",
            &topics.endpoints,
            "dlq",
            "redrive",
            "--event-id",
            &id,
        ],
    )
    .await;
    assert!(redrive.status.success(), "{}", stderr(&redrive));
    wait_until(DEADLINE, "the redrive delivered", || async {
        (receiver.count("flaky") >= 3).then_some(())
    })
    .await;

    // The log is written behind delivery: wait until it tells the delivery.
    let json = wait_until(DEADLINE, "the story ends delivered", || async {
        let out = show(&topics, &[&id, "--output", "json"]).await;
        let json: Value = serde_json::from_str(&stdout(&out)).ok()?;
        step_names(&json)
            .last()
            .is_some_and(|s| s == "delivered")
            .then_some(json)
    })
    .await;
    assert_eq!(json["event_id"], id.as_str());
    // Each dispatcher did not know the endpoint answer well before: the record waited its
    // turn in the slow lane before each attempt there, and the story says so. The rest of
    // the story is read without those steps.
    let all_steps = json["steps"].as_array().expect("steps").clone();
    let (laned, steps): (Vec<Value>, Vec<Value>) =
        all_steps.into_iter().partition(|s| s["step"] == "deferred");
    assert!(!laned.is_empty(), "{json}");
    assert!(
        laned
            .iter()
            .all(|s| s["tier"] == "lane" && s["reason"] == "endpoint_new"),
        "{json}"
    );
    let json = serde_json::json!({
        "steps": steps,
        "dispatchers": json["dispatchers"],
        "records_scanned": json["records_scanned"],
    });
    assert_eq!(
        step_names(&json),
        [
            "published",
            "attempt",
            "retry_scheduled",
            "attempt",
            "parked",
            "redriven",
            "attempt",
            "delivered"
        ]
    );
    let steps = json["steps"].as_array().expect("steps");
    let by: Vec<&str> = steps
        .iter()
        .filter_map(|s| s["dispatcher_id"].as_str())
        .collect();
    assert_eq!(
        by,
        ["disp-a", "disp-a", "disp-a", "disp-a", "disp-b", "disp-b"]
    );
    assert_eq!(json["dispatchers"], serde_json::json!(["disp-a", "disp-b"]));
    assert_eq!(steps[1]["http_status"], 500);
    assert_eq!(steps[1]["attempt"], 1);
    assert_eq!(steps[2]["tier"], "200ms");
    assert_eq!(steps[3]["attempt"], 2);
    assert_eq!(steps[4]["reason"], "retries_exhausted");
    assert_eq!(steps[5]["redriven_from"], format!("{}/0/0", topics.dlq));
    assert_eq!(steps[6]["http_status"], 200);
    assert_eq!(steps[6]["response_excerpt"], "accepted");
    // The excerpt is the response's start with its URL's query redacted.
    let excerpt = steps[1]["response_excerpt"].as_str().expect("an excerpt");
    assert!(
        excerpt.starts_with("upstream down; see https://status.example/x"),
        "{excerpt}"
    );
    assert!(!excerpt.contains("s3cr3t"), "{excerpt}");
    // Published is the event's own Kafka timestamp, before the first attempt, and kept
    // through the tier, the DLQ and the redrive.
    let published = steps[0]["at_ms"].as_i64().expect("published");
    assert!(published <= steps[1]["at_ms"].as_i64().expect("at"));
    assert!(
        steps
            .iter()
            .skip(1)
            .filter(|s| s["step"] != "redriven")
            .all(|s| s["published_at_ms"] == published)
    );
    assert!(json["records_scanned"].as_u64().is_some_and(|n| n >= 5));

    let text = show(&topics, &[&id]).await;
    assert!(text.status.success(), "{}", stderr(&text));
    let text = stdout(&text);
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.contains("to the slow lane"))
        .collect();
    assert!(
        lines[0].contains(&format!(
            "{} steps, 1 endpoint, dispatchers disp-a, disp-b",
            8 + laned.len()
        )),
        "{text}"
    );
    let order = [
        "published",
        "attempt 1",
        "retry_scheduled",
        "attempt 2",
        "parked",
        "redriven",
        "attempt 1",
        "delivered",
    ];
    for (line, want) in lines[1..].iter().zip(order) {
        assert!(line.contains(want), "{want} in {line}\n{text}");
    }
    assert!(lines[3].contains("to tier 200ms"), "{text}");
    assert!(
        lines[5].contains("retries_exhausted after 2 attempts  by disp-a"),
        "{text}"
    );
    assert!(
        lines[6].contains(&format!("from DLQ {}/0/0", topics.dlq)),
        "{text}"
    );
    assert!(
        lines[7].contains("HTTP 200") && lines[7].contains("by disp-b"),
        "{text}"
    );
    assert!(!text.contains("s3cr3t"), "{text}");
    assert!(terminate(&mut b).await.success());
}

/// Writes `records` to `topic` through the registry, keyed by event id with the
/// murmur2 partitioner (as the dispatcher does), `schema` their writer schema.
pub(crate) async fn write(topic: &str, schema: &str, records: &[AttemptRecord]) {
    let kafka = kafka_settings();
    let registry = Registry::new(&registry_settings()).expect("registry");
    let mut config = kafka.producer_config();
    config.set("partitioner", "murmur2_random");
    let producer: FutureProducer = config.create().expect("producer");
    for record in records {
        let mut value = record.to_avro_value();
        if schema == WEBHOOK_ATTEMPT_V1
            && let apache_avro::types::Value::Record(fields) = &mut value
        {
            fields.retain(|(name, _)| name != "published_at" && name != "redriven_from");
        }
        let bytes = registry
            .encode_value(topic, schema, value)
            .await
            .expect("encoded through the registry");
        producer
            .send(
                FutureRecord::to(topic)
                    .key(record.event_id.as_bytes())
                    .payload(&bytes),
                DEADLINE,
            )
            .await
            .expect("written");
    }
}

pub(crate) fn record(
    event_id: &str,
    kind: AttemptKind,
    at: i64,
    endpoint: &str,
    tenant: &str,
) -> AttemptRecord {
    AttemptRecord {
        event_id: event_id.to_owned(),
        tenant_id: Some(tenant.to_owned()),
        endpoint_id: Some(endpoint.to_owned()),
        kind,
        attempt: 1,
        timestamp_ms: at,
        duration_ms: Some(5),
        http_status: Some(503),
        error_kind: Some("server_error".to_owned()),
        response_excerpt: None,
        tier: None,
        reason: None,
        deliveries: None,
        dispatcher_id: "disp-w".to_owned(),
        trace_id: None,
        published_at_ms: Some(at - 10),
        redriven_from: None,
    }
}

fn high_watermark(topic: &str, partition: i32) -> i64 {
    let consumer: BaseConsumer = kafka_settings().client_config().create().expect("client");
    consumer
        .fetch_watermarks(topic, partition, DEADLINE)
        .expect("watermarks")
        .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn show_reads_one_partition_and_version_1_records() {
    let events = unique_name("evpart");
    let topic = format!("{events}.attempts");
    ensure_topics(&kafka_settings(), &[TopicSpec::new(&topic, 6, 1)])
        .await
        .expect("topic");
    let id = unique_name("evt-target");
    let now = hookline_dlq::filter::now_ms();
    let others: Vec<AttemptRecord> = (0..60)
        .map(|i| {
            record(
                &format!("{id}-other-{i}"),
                AttemptKind::Attempt,
                now + i,
                "ep-o",
                "t",
            )
        })
        .collect();
    // An old dispatcher's record (schema v1), then two of today's (v2).
    write(
        &topic,
        WEBHOOK_ATTEMPT_V1,
        &[record(&id, AttemptKind::Attempt, now, "ep-a", "acme")],
    )
    .await;
    write(&topic, WEBHOOK_ATTEMPT_CURRENT, &others).await;
    write(
        &topic,
        WEBHOOK_ATTEMPT_CURRENT,
        &[
            AttemptRecord {
                tier: Some("5s".to_owned()),
                reason: Some("server_error".to_owned()),
                ..record(&id, AttemptKind::RetryScheduled, now + 1, "ep-a", "acme")
            },
            AttemptRecord {
                http_status: Some(204),
                error_kind: None,
                attempt: 2,
                ..record(&id, AttemptKind::Attempt, now + 5_000, "ep-a", "acme")
            },
        ],
    )
    .await;
    let partition = partition_for(id.as_bytes(), 6).expect("a partition");
    let on_partition = high_watermark(&topic, partition);
    let total: i64 = (0..6).map(|p| high_watermark(&topic, p)).sum();
    assert!(on_partition < total, "other events are on other partitions");

    let out = hookline(&events, &["events", "show", &id, "--output", "json"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(json["partition"], partition);
    assert_eq!(
        json["records_scanned"].as_i64(),
        Some(on_partition),
        "one partition read"
    );
    assert_eq!(
        step_names(&json),
        [
            "published",
            "attempt",
            "retry_scheduled",
            "attempt",
            "delivered"
        ]
    );
    let steps = json["steps"].as_array().expect("steps");
    assert!(
        steps[1].get("published_at_ms").is_none(),
        "a v1 record has none"
    );
    assert_eq!(
        steps[0]["at_ms"],
        now - 9,
        "the first v2 record's publish time"
    );

    let missing = hookline(&events, &["events", "show", "evt-never-published"]).await;
    assert_eq!(missing.status.code(), Some(1), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("no attempt-log record of event evt-never-published"),
        "{}",
        stderr(&missing)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn show_tells_a_tenant_event_with_its_fan_out_and_each_delivery() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("evfan", &["200ms"]);
    topics.create(&kafka, 2).await;
    let receiver = hookline_testkit::Receiver::start().await;
    let producer: FutureProducer = kafka.producer_config().create().expect("producer");
    for name in ["ep-a", "ep-b"] {
        let url = receiver.script(name, |_| Reply::Status(204));
        let config = serde_json::json!({"url": url, "secrets": [SECRET], "tenant": "acme",
            "event_types": ["order.*"]})
        .to_string();
        producer
            .send(
                FutureRecord::to(&topics.endpoints)
                    .key(name)
                    .payload(&config),
                DEADLINE,
            )
            .await
            .expect("endpoint written");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let group = unique_name("evfan-group");
    let mut child = dispatcher(
        "disp-f",
        &topics,
        &config_file(dir.path(), "disp-f", &group, &topics),
        dir.path(),
    );
    let id = unique_name("evt-tenant");
    let value = serde_json::json!({
        "event_id": id, "event_type": "order.created", "tenant_id": "acme", "payload": {"n": 1},
    })
    .to_string();
    producer
        .send(
            FutureRecord::to(&topics.fanout).key("acme").payload(&value),
            DEADLINE,
        )
        .await
        .expect("tenant event written");
    let published = hookline_testkit::read_all(&kafka, &topics.fanout, 1, DEADLINE).await;
    let published = rdkafka::message::Message::timestamp(&published[0])
        .to_millis()
        .expect("a timestamp");
    let json = wait_until(DEADLINE, "both deliveries in the story", || async {
        let out = show(&topics, &[&id, "--output", "json"]).await;
        let json: Value = serde_json::from_str(&stdout(&out)).ok()?;
        (step_names(&json)
            .iter()
            .filter(|s| *s == "delivered")
            .count()
            == 2)
            .then_some(json)
    })
    .await;
    // Both endpoints are new to the dispatcher: each delivery waits its turn in the slow
    // lane first, and the story says so.
    let names: Vec<String> = step_names(&json)
        .into_iter()
        .filter(|s| s != "deferred")
        .collect();
    assert_eq!(
        names,
        [
            "published",
            "fanned_out",
            "attempt",
            "delivered",
            "attempt",
            "delivered"
        ]
    );
    let laned = step_names(&json).len() - names.len();
    assert_eq!(json["tenant_id"], "acme");
    assert_eq!(json["endpoints"], serde_json::json!(["ep-a", "ep-b"]));
    let steps = json["steps"].as_array().expect("steps");
    assert_eq!(
        steps[0]["at_ms"], published,
        "the tenant event's own timestamp"
    );
    assert_eq!(steps[1]["deliveries"], 2);
    assert!(
        steps
            .iter()
            .skip(1)
            .all(|s| s["published_at_ms"] == published),
        "every delivery knows when its tenant event was published: {json}"
    );
    let text = stdout(&show(&topics, &[&id]).await);
    assert!(
        text.starts_with(&format!(
            "event {id} (tenant acme): {} steps, 2 endpoints",
            6 + laned
        )),
        "{text}"
    );
    assert!(text.contains("to 2 deliveries"), "{text}");
    assert!(terminate(&mut child).await.success());
}
