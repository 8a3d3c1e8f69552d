//! `hookline fanout` as its own process, killed with SIGKILL in the middle of fanning out:
//! afterwards every endpoint has every event exactly once, and a strictly ordered endpoint
//! has the tenant's events in the order they were published.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use hookline_testkit::{
    Receiver, Reply, TestTopics, kafka_settings, read_all, registry_settings, unique_name,
    wait_until,
};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::process::{Child, Command};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DEADLINE: Duration = Duration::from_secs(240);
const ENDPOINTS: usize = 1_000;
const EVENTS: usize = 100;

/// Starts `hookline <role>` with `config`, logging to `<dir>/<name>.log`.
fn hookline(role: &[&str], name: &str, topics: &TestTopics, config: &Path, dir: &Path) -> Child {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file");
    Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(["--bootstrap-servers", &kafka_settings().bootstrap_servers])
        .args(["--registry-url", &registry_settings().url])
        .args(["--events-topic", &topics.events])
        .args(["--endpoints-topic", &topics.endpoints])
        .args(role)
        .arg("--config")
        .arg(config)
        // A line per delivery would slow the 100,000 of this test to a crawl.
        .env("RUST_LOG", "warn,hookline_dispatcher::fanout=info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("hookline starts")
}

/// Records written to `topic` so far (open and aborted transactions included).
fn written(topic: &str) -> i64 {
    let consumer: BaseConsumer = kafka_settings()
        .client_config()
        .create()
        .expect("metadata client");
    (0..2)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .map_or(0, |(_, high)| high)
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_fanout_mid_stream_neither_loses_nor_doubles_nor_reorders() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("fankill", &["500ms", "2s"]);
    topics.create(&kafka, 2).await;
    let receiver = Receiver::start().await;
    let producer: FutureProducer = kafka.producer_config().create().expect("producer");
    let names: Vec<String> = (0..ENDPOINTS).map(|i| format!("ep-{i:04}")).collect();
    let configs: Vec<String> = names
        .iter()
        .map(|name| {
            let url = receiver.script(name, |_| Reply::Status(204));
            serde_json::json!({"url": url, "secrets": [SECRET], "tenant": "acme",
                "event_types": ["order.*"], "strict_ordering": true})
            .to_string()
        })
        .collect();
    let writes = names.iter().zip(&configs).map(|(name, config)| {
        producer.send(
            FutureRecord::to(&topics.endpoints)
                .key(name.as_str())
                .payload(config.as_str()),
            DEADLINE,
        )
    });
    for written in futures::future::join_all(writes).await {
        written.expect("endpoint written");
    }

    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("hookline.toml");
    std::fs::write(
        &config,
        format!(
            r#"group_id = "{group}"
shutdown_grace_ms = 5000
session_timeout_ms = 6000

[topics]
retry_tiers = ["500ms", "2s"]

[retry]
base_ms = 200
cap_ms = 1000

[outbound]
allow_loopback = true

[concurrency]
max_in_flight = 256

[admin]
listen = "127.0.0.1:0"

[fanout]
transaction_timeout_ms = 3000
max_batch_events = 1
"#,
            group = unique_name("fankill-group"),
        ),
    )
    .expect("config file");

    let mut dispatcher = hookline(
        &["dispatch", "--no-fanout"],
        "dispatch",
        &topics,
        &config,
        dir.path(),
    );
    let mut fanout = hookline(&["fanout"], "fanout-a", &topics, &config, dir.path());

    let mut ids = Vec::new();
    for n in 0..EVENTS {
        let id = format!("evt-{n:03}-{}", unique_name("k"));
        let value = serde_json::json!({
            "event_id": id, "event_type": "order.created", "tenant_id": "acme",
            "payload": {"n": n},
        })
        .to_string();
        producer
            .send(
                FutureRecord::to(&topics.fanout).key("acme").payload(&value),
                DEADLINE,
            )
            .await
            .expect("tenant event written");
        ids.push(id);
    }

    // Kill the fan-out once a few of the events are fanned out, well before the last.
    wait_until(DEADLINE, "the fan-out under way", || async {
        (written(&topics.events) >= 5_000).then_some(())
    })
    .await;
    fanout.start_kill().expect("kill -9");
    fanout.wait().await.expect("killed");
    let at_kill = written(&topics.events);
    assert!(
        at_kill < (ENDPOINTS * EVENTS) as i64,
        "the fan-out had finished ({at_kill} records) before the kill"
    );
    let mut restarted = hookline(&["fanout"], "fanout-b", &topics, &config, dir.path());

    let total = ENDPOINTS * EVENTS;
    wait_until(DEADLINE, "every endpoint served every event", || async {
        (names.iter().map(|n| receiver.count(n)).sum::<usize>() >= total).then_some(())
    })
    .await;
    // Exactly once and in order: each endpoint has each event once, in publish order, and
    // the events topic holds exactly one committed delivery per endpoint and event (a
    // killed transaction's are aborted).
    for name in &names {
        let seen: Vec<String> = receiver
            .received(name)
            .iter()
            .map(|request| request.header("webhook-id").expect("webhook-id").to_owned())
            .collect();
        assert_eq!(seen, ids, "{name}");
    }
    let records = read_all(&kafka, &topics.events, total, DEADLINE).await;
    assert_eq!(records.len(), total);

    for child in [&mut restarted, &mut dispatcher] {
        let exit = crate::dispatch::terminate(child).await;
        assert!(exit.success(), "graceful stop exits 0, got {exit}");
    }
}
