//! The endpoint credentials through the binary: `endpoints put` with a client certificate
//! and key from files and a bearer token from `${env:..}`, `endpoints list`, and
//! `hookline dispatch` delivering over mTLS to a receiver that requires the certificate
//! (the one without it ends in the DLQ). The key and the token show in no command output,
//! no DLQ record and no line of the dispatcher's debug log.

use std::process::{Output, Stdio};
use std::time::Duration;

use hookline_testkit::{
    TestPki, TestTopics, TlsReceiver, kafka_settings, read_all, registry_settings, unique_name,
    wait_until,
};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::process::Command;

use crate::dispatch::terminate;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DEADLINE: Duration = Duration::from_secs(60);
const TOKEN_VAR: &str = "HOOKLINE_E2E_EGRESS_TOKEN";

fn hookline(topics: &TestTopics) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hookline"));
    command
        .args(["--bootstrap-servers", &kafka_settings().bootstrap_servers])
        .args(["--registry-url", &registry_settings().url])
        .args(["--events-topic", &topics.events])
        .args(["--endpoints-topic", &topics.endpoints])
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

async fn run(command: &mut Command) -> Output {
    tokio::time::timeout(DEADLINE, command.output())
        .await
        .expect("hookline finishes before the deadline")
        .expect("hookline runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn credentials_from_put_reach_the_receiver_and_no_output_log_or_dlq_record() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("cli-egress", &["200ms", "500ms"]);
    topics.create(&kafka, 1).await;
    let pki = TestPki::new("hookline cli e2e CA");
    let client = pki.client("hookline-cli-e2e");
    let tls = TlsReceiver::start(&pki, true).await;
    let token = format!("tok_{}", unique_name("cli"));
    let key_body = client
        .key_pem
        .lines()
        .nth(1)
        .expect("key base64")
        .to_owned();
    let mut dir = tempfile::tempdir().expect("temp dir");
    let (cert_file, key_file, ca_file) = (
        dir.path().join("client.pem"),
        dir.path().join("client.key"),
        dir.path().join("ca.pem"),
    );
    std::fs::write(&cert_file, &client.certificate_pem).expect("write");
    std::fs::write(&key_file, &client.key_pem).expect("write");
    std::fs::write(&ca_file, pki.ca_pem()).expect("write");
    let reference = format!("${{env:{TOKEN_VAR}}}");

    let mut outputs = String::new();
    for (id, url, mtls) in [
        ("ep-mtls", tls.url("mtls"), true),
        ("ep-nocert", tls.url("nocert"), false),
    ] {
        let mut put = hookline(&topics);
        put.args(["endpoints", "put", id, "--url", &url, "--secret", SECRET])
            .args(["--bearer-token", &reference])
            .env(TOKEN_VAR, &token);
        if mtls {
            put.arg("--client-cert")
                .arg(&cert_file)
                .arg("--client-key")
                .arg(&key_file);
        }
        let output = run(&mut put).await;
        assert!(output.status.success(), "{}", text(&output));
        outputs.push_str(&text(&output));
    }
    let list = run(hookline(&topics).args(["endpoints", "list"])).await;
    assert!(list.status.success(), "{}", text(&list));
    let tail: String = token
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert!(
        text(&list).contains(&format!("mtls,bearer(…{tail})")),
        "{}",
        text(&list)
    );
    outputs.push_str(&text(&list));
    let json = run(hookline(&topics).args(["endpoints", "list", "--output", "json"])).await;
    assert!(json.status.success(), "{}", text(&json));
    outputs.push_str(&text(&json));

    let config = dir.path().join("dispatcher.toml");
    std::fs::write(
        &config,
        format!(
            "group_id = \"{group}\"\nshutdown_grace_ms = 5000\n\n[topics]\nretry_tiers = [\"200ms\", \"500ms\"]\n\n\
             [retry]\nstrategy = \"fixed\"\nbase_ms = 200\ncap_ms = 500\nmax_attempts = 3\n\n\
             [outbound]\nallow_loopback = true\n\n[http]\ntimeout_ms = 2000\nca_file = {ca:?}\n\n\
             [admin]\nlisten = \"127.0.0.1:0\"\n",
            group = unique_name("cli-egress-group"),
            ca = ca_file.to_str().expect("utf-8"),
        ),
    )
    .expect("config file");
    let log_path = dir.path().join("dispatch.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let mut dispatch = hookline(&topics)
        .arg("dispatch")
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("hookline dispatch starts");

    let producer: FutureProducer = kafka.producer_config().create().expect("producer");
    for (n, endpoint) in ["ep-mtls", "ep-nocert"].iter().enumerate() {
        let value = serde_json::json!({
            "event_id": format!("evt-{n}-{}", unique_name("e")), "event_type": "invoice.paid",
            "endpoint_id": endpoint, "payload": { "n": n },
        })
        .to_string();
        producer
            .send(
                FutureRecord::to(&topics.events)
                    .key(*endpoint)
                    .payload(&value),
                DEADLINE,
            )
            .await
            .expect("event written");
    }

    let waiting = format!("the mTLS delivery (see {})", log_path.display());
    // Kept if the delivery never comes: the failure names the log.
    dir.disable_cleanup(true);
    let received = wait_until(DEADLINE, &waiting, || async {
        tls.received().into_iter().find(|r| r.path == "/hooks/mtls")
    })
    .await;
    dir.disable_cleanup(false);
    assert_eq!(received.client_subject.as_deref(), Some("hookline-cli-e2e"));
    let bearer = format!("Bearer {token}");
    assert_eq!(received.header("authorization"), Some(bearer.as_str()));

    let dlq = read_all(&kafka, &topics.dlq, 1, DEADLINE).await;
    assert_eq!(dlq.len(), 1);
    assert!(
        tls.refused_handshakes() >= 3,
        "{}",
        tls.refused_handshakes()
    );
    assert!(terminate(&mut dispatch).await.success());

    let mut record = dlq[0].payload().unwrap_or_default().to_vec();
    if let Some(headers) = dlq[0].headers() {
        for header in headers.iter() {
            record.extend_from_slice(header.value.unwrap_or_default());
        }
    }
    let record = String::from_utf8_lossy(&record).into_owned();
    assert!(
        record.contains("ep-nocert"),
        "the DLQ record of the failed endpoint"
    );
    let log = std::fs::read_to_string(&log_path).expect("the log");
    assert!(log.contains("ep-mtls"), "the log is the run's: {log}");
    for (what, haystack) in [("output", &outputs), ("DLQ record", &record), ("log", &log)] {
        assert!(!haystack.contains(&token), "the token is in the {what}");
        assert!(!haystack.contains(&key_body), "the key is in the {what}");
    }
}
