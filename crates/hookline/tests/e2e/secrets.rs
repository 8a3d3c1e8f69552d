//! A run of hookline with secrets, credentials and query tokens configured wherever they can
//! be, then a search of everything the run produced for them: the dispatcher's log (at debug
//! level for hookline's crates), its metrics, every record it wrote (retry copies with their
//! headers, DLQ envelopes), and the output of the CLI commands an operator runs
//! (`endpoints put/list`, `dlq inspect`). None of them may contain a secret.
//!
//! The endpoints topic is not searched: it is where the endpoint configs, secrets included,
//! are kept (protect it with Kafka ACLs; README "Security").

use std::net::TcpListener;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use hookline_testkit::{
    Receiver, Reply, TestTopics, kafka_settings, read_all, registry_settings, unique_name,
    wait_until,
};
use rdkafka::Message;
use rdkafka::message::Headers;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use crate::dispatch::terminate;

const DEADLINE: Duration = Duration::from_secs(60);

/// A signing secret: `whsec_` + base64 of `hookline-leak-test-secret-0001`.
const WHSEC: &str = "whsec_aG9va2xpbmUtbGVhay10ZXN0LXNlY3JldC0wMDAx";
/// Its key, base64 (searched for on its own too).
const WHSEC_KEY: &str = "aG9va2xpbmUtbGVhay10ZXN0LXNlY3JldC0wMDAx";
const HEADER_VALUE: &str = "hdr-value-5f1c9a";
const HEADER_AUTH: &str = "hdr-auth-8b2e4d";
const QUERY_OK: &str = "qtok-ok-3a7f11";
const QUERY_FAIL: &str = "qtok-fail-9d0c22";
const QUERY_DEAD: &str = "qtok-dead-6e4b33";
/// The secret of an endpoint config with a type error (`secrets` as a string).
const BAD_CONFIG_SECRET: &str = "whsec_YmFkLWNvbmZpZy1zZWNyZXQtdmFsdWUtNDQ0";

/// Every secret the run configures.
const SECRETS: &[&str] = &[
    WHSEC,
    WHSEC_KEY,
    HEADER_VALUE,
    HEADER_AUTH,
    QUERY_OK,
    QUERY_FAIL,
    QUERY_DEAD,
    BAD_CONFIG_SECRET,
];

/// Everything the run produced, by where it came from.
#[derive(Default)]
struct Produced(Vec<(String, Vec<u8>)>);

impl Produced {
    fn add(&mut self, source: impl Into<String>, bytes: impl Into<Vec<u8>>) {
        self.0.push((source.into(), bytes.into()));
    }

    fn output(&mut self, command: &str, output: &Output) {
        self.add(format!("{command} (stdout)"), output.stdout.clone());
        self.add(format!("{command} (stderr)"), output.stderr.clone());
    }

    /// Each place that contains a secret, as `source: secret`.
    fn leaks(&self) -> Vec<String> {
        let mut leaks = Vec::new();
        for (source, bytes) in &self.0 {
            let text = String::from_utf8_lossy(bytes);
            for secret in SECRETS {
                if text.contains(secret) {
                    leaks.push(format!("{source}: {secret}"));
                }
            }
        }
        leaks
    }
}

async fn hookline(topics: &TestTopics, args: &[&str]) -> Output {
    tokio::time::timeout(
        DEADLINE,
        Command::new(env!("CARGO_BIN_EXE_hookline"))
            .args(["--bootstrap-servers", &kafka_settings().bootstrap_servers])
            .args(["--registry-url", &registry_settings().url])
            .args(["--events-topic", &topics.events])
            .args(["--endpoints-topic", &topics.endpoints])
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("hookline finishes before the deadline")
    .expect("hookline runs")
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

fn dispatcher(topics: &TestTopics, dir: &Path, admin_port: u16) -> Child {
    let config = dir.join("dispatcher.toml");
    let tiers = topics
        .tiers
        .iter()
        .map(|t| format!("{t:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    std::fs::write(
        &config,
        format!(
            r#"group_id = "{group}"
shutdown_grace_ms = 3000

[topics]
retry_tiers = [{tiers}]

[retry]
base_ms = 200
cap_ms = 300
max_attempts = 2

[http]
timeout_ms = 2000

[outbound]
allow_loopback = true

[admin]
listen = "127.0.0.1:{admin_port}"
"#,
            group = unique_name("secrets-group"),
        ),
    )
    .expect("config file");
    let log = std::fs::File::create(dir.join("dispatcher.log")).expect("log file");
    let stdout = log.try_clone().expect("log file");
    Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(["--bootstrap-servers", &kafka_settings().bootstrap_servers])
        .args(["--registry-url", &registry_settings().url])
        .args(["--events-topic", &topics.events])
        .args(["--endpoints-topic", &topics.endpoints])
        .arg("dispatch")
        .arg("--config")
        .arg(&config)
        .env(
            "RUST_LOG",
            "info,hookline=debug,hookline_dispatcher=debug,hookline_core=debug,\
             hookline_kafka=debug,hookline_dlq=debug,hookline_producer=debug",
        )
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("hookline dispatch starts")
}

/// `GET /metrics` of the admin port, as bytes.
async fn metrics(port: u16) -> Vec<u8> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("admin port");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .expect("request");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("answer");
    answer
}

/// Every record of `topic` (keys, header names and values, values), as one text each.
async fn records(topic: &str, at_least: usize) -> Vec<Vec<u8>> {
    read_all(&kafka_settings(), topic, at_least, DEADLINE)
        .await
        .iter()
        .map(|m| {
            let mut bytes = m.key().unwrap_or_default().to_vec();
            if let Some(headers) = m.headers() {
                for header in headers.iter() {
                    bytes.extend_from_slice(header.key.as_bytes());
                    bytes.push(b'=');
                    bytes.extend_from_slice(header.value.unwrap_or_default());
                    bytes.push(b'\n');
                }
            }
            bytes.extend_from_slice(m.payload().unwrap_or_default());
            bytes
        })
        .collect()
}

async fn put(topics: &TestTopics, produced: &mut Produced, id: &str, args: &[&str]) {
    let all = [&["endpoints", "put", id][..], args].concat();
    let output = hookline(topics, &all).await;
    assert!(
        output.status.success(),
        "endpoints put {id}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    produced.output(&format!("endpoints put {id}"), &output);
}

async fn publish(topics: &TestTopics, produced: &mut Produced, endpoint: &str, extra: &[&str]) {
    let all = [
        &["publish", "--endpoint", endpoint, "--type", "secret.test"][..],
        &["--data", r#"{"n":1}"#],
        extra,
    ]
    .concat();
    let output = hookline(topics, &all).await;
    assert!(
        output.status.success(),
        "publish to {endpoint}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    produced.output(&format!("publish {endpoint}"), &output);
}

#[tokio::test]
async fn no_secret_reaches_a_log_a_metric_a_record_or_the_cli() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("secrets", &["300ms"]);
    topics.create(&kafka, 1).await;
    let dir = std::env::temp_dir().join(unique_name("secrets"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut produced = Produced::default();

    let receiver = Receiver::start().await;
    let ok = receiver.script("ok", |_| Reply::Status(200));
    let fail = receiver.script("fail", |_| Reply::Status(500));
    let foreign = receiver.script("foreign", |_| Reply::Status(200));
    let dead = format!("http://127.0.0.1:{}/hook", free_port());

    let header = format!("X-Api-Key={HEADER_VALUE}");
    let auth = format!("Authorization=Bearer {HEADER_AUTH}");
    let ok_url = format!("{ok}?token={QUERY_OK}");
    let fail_url = format!("{fail}?token={QUERY_FAIL}");
    let dead_url = format!("{dead}?token={QUERY_DEAD}");
    put(
        &topics,
        &mut produced,
        "ep_ok",
        &["--url", &ok_url, "--secret", WHSEC, "--header", &header],
    )
    .await;
    put(
        &topics,
        &mut produced,
        "ep_fail",
        &["--url", &fail_url, "--secret", WHSEC, "--header", &auth],
    )
    .await;
    put(
        &topics,
        &mut produced,
        "ep_dead",
        &["--url", &dead_url, "--secret", WHSEC],
    )
    .await;
    // A config with a type error, written as a producer with a typo would.
    let producer: FutureProducer = kafka.producer_config().create().expect("producer");
    let bad = format!(r#"{{"url":"https://bad.example/","secrets":"{BAD_CONFIG_SECRET}"}}"#);
    producer
        .send(
            FutureRecord::to(&topics.endpoints)
                .key("ep_bad")
                .payload(&bad),
            DEADLINE,
        )
        .await
        .expect("bad config written");

    let admin_port = free_port();
    let mut child = dispatcher(&topics, &dir, admin_port);
    publish(&topics, &mut produced, "ep_ok", &[]).await;
    publish(&topics, &mut produced, "ep_fail", &[]).await;
    publish(&topics, &mut produced, "ep_dead", &[]).await;
    // An override URL chosen by whoever publishes: the endpoint's headers never go there.
    publish(
        &topics,
        &mut produced,
        "ep_ok",
        &["--endpoint-url", &foreign],
    )
    .await;

    wait_until(
        DEADLINE,
        "ep_ok delivered and two endpoints parked",
        || async {
            let parked = records(&topics.dlq, 0).await.len();
            (receiver.count("ok") >= 1 && parked >= 2).then_some(())
        },
    )
    .await;
    for request in receiver.received("foreign") {
        let headers = format!("{:?}", request.headers);
        assert!(
            !headers.contains(HEADER_VALUE),
            "the endpoint's custom header went to a URL the publisher chose: {headers}"
        );
    }
    produced.add("GET /metrics", metrics(admin_port).await);

    for (i, record) in records(&topics.dlq, 2).await.into_iter().enumerate() {
        produced.add(format!("DLQ record {i}"), record);
    }
    for tier in &topics.tiers {
        let topic = topics.tier_topic(tier);
        for (i, record) in records(&topic, 0).await.into_iter().enumerate() {
            produced.add(format!("{topic} record {i}"), record);
        }
    }
    for args in [
        &["endpoints", "list"][..],
        &["endpoints", "list", "--output", "json"],
        &["dlq", "inspect", "--all", "--output", "table"],
        &["dlq", "inspect", "--all", "--output", "json"],
        &["dlq", "inspect", "--all", "--summary"],
    ] {
        let output = hookline(&topics, args).await;
        produced.output(&args.join(" "), &output);
    }

    assert!(terminate(&mut child).await.success());
    produced.add(
        "dispatcher log",
        std::fs::read(dir.join("dispatcher.log")).expect("dispatcher log"),
    );
    let leaks = produced.leaks();
    assert!(leaks.is_empty(), "secrets found:\n{}", leaks.join("\n"));
    std::fs::remove_dir_all(&dir).ok();
}
