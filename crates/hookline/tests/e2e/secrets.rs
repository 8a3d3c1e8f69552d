//! A run of hookline with secrets, credentials and query tokens configured wherever they can
//! be, then a search of everything the run produced for them: the dispatcher's log (at debug
//! level for hookline's crates), its metrics, every record it wrote (retry copies with their
//! headers, DLQ envelopes, the attempt log), the output of the CLI commands an operator runs
//! (`endpoints put/list`, `dlq inspect`) and their command lines. None of them may contain a
//! secret.
//!
//! Every hookline process of the run reaches Kafka through the stack's SASL_SSL listener
//! (SCRAM password as a `${file:...}` reference) and the registry through an authenticating
//! TLS proxy (password from `HOOKLINE_REGISTRY_PASSWORD`). Endpoints sign with secrets and a
//! generated Ed25519 key, send a bearer credential, custom headers and query tokens.
//!
//! The endpoints topic is not searched: it is where the endpoint configs, secrets included,
//! are kept (protect it with Kafka ACLs; README "Security").

use std::net::TcpListener;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use hookline_testkit::{
    AuthProxy, Credentials, Receiver, Reply, TestTopics, kafka_settings, read_all,
    registry_settings, secure_bootstrap, secure_password_file, secure_properties, unique_name,
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
/// The bearer credential of `ep_ok`'s receiver.
const BEARER: &str = "bearer-tok-7c3e91";
/// The registry password (the proxy's).
const REGISTRY_PASSWORD: &str = "registry-pw-2b8d55";

/// The secrets every run configures; the run adds the Kafka password and the generated
/// signing key.
const SECRETS: &[&str] = &[
    WHSEC,
    WHSEC_KEY,
    HEADER_VALUE,
    HEADER_AUTH,
    QUERY_OK,
    QUERY_FAIL,
    QUERY_DEAD,
    BAD_CONFIG_SECRET,
    BEARER,
    REGISTRY_PASSWORD,
];

/// Where every hookline process of the run connects, and how.
struct Connection {
    topics: TestTopics,
    registry: AuthProxy,
    /// `--kafka-property` values, the SCRAM password as a reference.
    properties: Vec<String>,
}

impl Connection {
    async fn new(topics: TestTopics) -> Self {
        let registry = AuthProxy::start(
            &registry_settings().url,
            Credentials::Basic {
                username: "hookline".to_owned(),
                password: REGISTRY_PASSWORD.to_owned(),
            },
        )
        .await;
        let reference = format!("${{file:{}}}", secure_password_file().display());
        let properties = secure_properties(&reference)
            .into_iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        Connection {
            topics,
            registry,
            properties,
        }
    }

    /// The arguments before the subcommand.
    fn args(&self) -> Vec<String> {
        let mut args = vec![
            "--bootstrap-servers".to_owned(),
            secure_bootstrap(),
            "--registry-url".to_owned(),
            self.registry.url().to_owned(),
            "--registry-username".to_owned(),
            "hookline".to_owned(),
            "--registry-ca-file".to_owned(),
            self.registry.ca_file().display().to_string(),
            "--events-topic".to_owned(),
            self.topics.events.clone(),
            "--endpoints-topic".to_owned(),
            self.topics.endpoints.clone(),
        ];
        for property in &self.properties {
            args.extend(["--kafka-property".to_owned(), property.clone()]);
        }
        args
    }

    /// `hookline <args>` through the secured listener and the registry proxy.
    fn command(&self, args: &[&str], produced: &mut Produced) -> Command {
        let mut all = self.args();
        all.extend(args.iter().map(|arg| (*arg).to_owned()));
        produced.add("command line", all.join(" "));
        let mut command = Command::new(env!("CARGO_BIN_EXE_hookline"));
        command
            .args(&all)
            .env("HOOKLINE_REGISTRY_PASSWORD", REGISTRY_PASSWORD)
            .env("HOOKLINE_TEST_BEARER", BEARER)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }
}

/// Everything the run produced, by where it came from, and the secrets to look for.
#[derive(Default)]
struct Produced {
    outputs: Vec<(String, Vec<u8>)>,
    secrets: Vec<String>,
}

impl Produced {
    fn add(&mut self, source: impl Into<String>, bytes: impl Into<Vec<u8>>) {
        self.outputs.push((source.into(), bytes.into()));
    }

    fn output(&mut self, command: &str, output: &Output) {
        self.add(format!("{command} (stdout)"), output.stdout.clone());
        self.add(format!("{command} (stderr)"), output.stderr.clone());
    }

    /// Each place that contains a secret, as `source: secret`.
    fn leaks(&self) -> Vec<String> {
        let mut leaks = Vec::new();
        let secrets = SECRETS.iter().map(|s| (*s).to_owned());
        let secrets: Vec<String> = secrets.chain(self.secrets.iter().cloned()).collect();
        for (source, bytes) in &self.outputs {
            let text = String::from_utf8_lossy(bytes);
            for secret in &secrets {
                if text.contains(secret.as_str()) {
                    leaks.push(format!("{source}: {secret}"));
                }
            }
        }
        leaks
    }
}

async fn hookline(connection: &Connection, produced: &mut Produced, args: &[&str]) -> Output {
    let output = tokio::time::timeout(
        DEADLINE,
        connection
            .command(args, produced)
            .env("RUST_LOG", "info")
            .output(),
    )
    .await
    .expect("hookline finishes before the deadline")
    .expect("hookline runs");
    produced.output(&args.join(" "), &output);
    output
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

fn dispatcher(
    connection: &Connection,
    produced: &mut Produced,
    dir: &Path,
    admin_port: u16,
) -> Child {
    let config = dir.join("dispatcher.toml");
    let tiers = connection.topics.tiers_toml();
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
    let config = config.display().to_string();
    connection
        .command(&["dispatch", "--config", &config], produced)
        .env(
            "RUST_LOG",
            "info,hookline=debug,hookline_dispatcher=debug,hookline_core=debug,\
             hookline_kafka=debug,hookline_dlq=debug,hookline_producer=debug",
        )
        .stdout(stdout)
        .stderr(log)
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

async fn put(connection: &Connection, produced: &mut Produced, id: &str, args: &[&str]) {
    let all = [&["endpoints", "put", id][..], args].concat();
    let output = hookline(connection, produced, &all).await;
    assert!(
        output.status.success(),
        "endpoints put {id}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

async fn publish(connection: &Connection, produced: &mut Produced, endpoint: &str, extra: &[&str]) {
    let all = [
        &["publish", "--endpoint", endpoint, "--type", "secret.test"][..],
        &["--data", r#"{"n":1}"#],
        extra,
    ]
    .concat();
    let output = hookline(connection, produced, &all).await;
    assert!(
        output.status.success(),
        "publish to {endpoint}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The `whsk_` signing keys stored in the endpoints topic (the secrets of the keys the
/// run generated).
async fn stored_signing_keys(topic: &str) -> Vec<String> {
    let mut keys = Vec::new();
    for record in read_all(&kafka_settings(), topic, 1, DEADLINE).await {
        let config: serde_json::Value =
            serde_json::from_slice(record.payload().unwrap_or_default()).unwrap_or_default();
        if let Some(stored) = config["signing_keys"].as_array() {
            keys.extend(stored.iter().filter_map(|k| k.as_str().map(str::to_owned)));
        }
    }
    keys
}

#[tokio::test]
async fn no_secret_reaches_a_log_a_metric_a_record_or_the_cli() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("secrets", &["300ms"]);
    topics.create(&kafka, 1).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut produced = Produced::default();
    let kafka_password =
        std::fs::read_to_string(secure_password_file()).expect("the SCRAM password file");
    produced.secrets.push(kafka_password.trim_end().to_owned());
    let connection = Connection::new(topics).await;
    let topics = &connection.topics;

    let receiver = Receiver::start().await;
    let ok = receiver.script("ok", |_| Reply::Status(200));
    let fail = receiver.script("fail", |_| Reply::Status(500));
    let foreign = receiver.script("foreign", |_| Reply::Status(200));
    let dead = format!("http://127.0.0.1:{}/hook", free_port());

    // Every secret reaches the CLI through a file, never its command line.
    let file_ref = |name: &str, value: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, value).expect("secret file");
        format!("${{file:{}}}", path.display())
    };
    let header = format!("X-Api-Key={}", file_ref("header", HEADER_VALUE));
    let auth = format!(
        "Authorization={}",
        file_ref("auth", &format!("Bearer {HEADER_AUTH}"))
    );
    let ok_url = file_ref("ok-url", &format!("{ok}?token={QUERY_OK}"));
    let fail_url = file_ref("fail-url", &format!("{fail}?token={QUERY_FAIL}"));
    let dead_url = file_ref("dead-url", &format!("{dead}?token={QUERY_DEAD}"));
    let whsec_file = dir.path().join("whsec");
    std::fs::write(&whsec_file, WHSEC).expect("secret file");
    let whsec_file = whsec_file.display().to_string();
    let ok_args = [
        "--url",
        &ok_url,
        "--secret-file",
        &whsec_file,
        "--generate-signing-key",
        "--header",
        &header,
        "--bearer-token",
        "${env:HOOKLINE_TEST_BEARER}",
    ];
    put(&connection, &mut produced, "ep_ok", &ok_args).await;
    let fail_args = [
        "--url",
        &fail_url,
        "--secret-file",
        &whsec_file,
        "--header",
        &auth,
    ];
    put(&connection, &mut produced, "ep_fail", &fail_args).await;
    let dead_args = ["--url", &dead_url, "--secret-file", &whsec_file];
    put(&connection, &mut produced, "ep_dead", &dead_args).await;
    produced
        .secrets
        .extend(stored_signing_keys(&topics.endpoints).await);
    assert_eq!(
        produced.secrets.len(),
        2,
        "ep_ok's generated signing key is stored"
    );
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
    let mut child = dispatcher(&connection, &mut produced, dir.path(), admin_port);
    publish(&connection, &mut produced, "ep_ok", &[]).await;
    publish(&connection, &mut produced, "ep_fail", &[]).await;
    publish(&connection, &mut produced, "ep_dead", &[]).await;
    // An override URL chosen by whoever publishes: ep_ok did not allow it.
    publish(
        &connection,
        &mut produced,
        "ep_ok",
        &["--endpoint-url", &foreign],
    )
    .await;

    wait_until(
        DEADLINE,
        "ep_ok delivered and three events parked",
        || async {
            let parked = records(&topics.dlq, 0).await.len();
            (receiver.count("ok") >= 1 && parked >= 3).then_some(())
        },
    )
    .await;
    let delivered = &receiver.received("ok")[0];
    let expected = format!("Bearer {BEARER}");
    assert_eq!(delivered.header("authorization"), Some(expected.as_str()));
    let signatures = delivered.header("webhook-signature").unwrap_or_default();
    assert!(
        signatures.contains("v1,") && signatures.contains("v1a,"),
        "signed with the secret and the key: {signatures}"
    );
    assert_eq!(
        receiver.count("foreign"),
        0,
        "nothing went to the override URL"
    );
    assert!(
        connection.registry.authorized() > 0,
        "the registry was used"
    );
    produced.add("GET /metrics", metrics(admin_port).await);

    for (i, record) in records(&topics.dlq, 3).await.into_iter().enumerate() {
        produced.add(format!("DLQ record {i}"), record);
    }
    for (i, record) in records(&topics.attempts, 1).await.into_iter().enumerate() {
        produced.add(format!("attempt log record {i}"), record);
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
        hookline(&connection, &mut produced, args).await;
    }

    assert!(terminate(&mut child).await.success());
    let log = std::fs::read(dir.path().join("dispatcher.log")).expect("dispatcher log");
    let text = String::from_utf8_lossy(&log);
    assert!(
        text.contains("DEBUG") && text.contains("ep_dead") && text.contains("ep_bad"),
        "the log has hookline's debug lines, the parked endpoint and the bad config: {text}"
    );
    produced.add("dispatcher log", log);
    let leaks = produced.leaks();
    assert!(leaks.is_empty(), "secrets found:\n{}", leaks.join("\n"));
}
