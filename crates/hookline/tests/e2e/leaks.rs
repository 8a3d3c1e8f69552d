//! End-to-end checks that nothing secret or hostile leaks out of the `hookline` binary: a
//! token in an endpoint URL's query string stays out of the DLQ record, the retry headers and
//! the dispatcher's log; a secret in a mistyped endpoint config stays out of the dispatcher's
//! warning and of `endpoints list`; and terminal escapes in DLQ records are shown escaped.

use std::time::Duration;

use hookline_core::envelope::{DlqEnvelope, DlqHeader, ErrorReason};
use hookline_kafka::Registry;
use hookline_testkit::{TestTopics, kafka_settings, read_all, registry_settings, unique_name};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};

use crate::dispatch::{dispatcher, terminate};
use crate::dlq_cli::{envelope, hookline, stack_with, stderr, stdout};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The secret body of `SECRET`, which must never be printed.
const SECRET_BODY: &str = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DEADLINE: Duration = Duration::from_secs(90);

/// A loopback port nothing listens on (it was free a moment ago).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn url_tokens_and_config_secrets_stay_out_of_records_headers_and_logs() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("leaks", &["200ms", "500ms"]);
    topics.create(&kafka, 1).await;
    let producer: FutureProducer = kafka.producer_config().create().expect("producer");
    let url = format!("http://127.0.0.1:{}/hook?token=SECRETVALUE", closed_port());
    let endpoints = [
        (
            "ep-tok",
            serde_json::json!({ "url": url, "secrets": [SECRET] }),
        ),
        // A type error: the secret given as a string instead of a list.
        (
            "ep-bad",
            serde_json::json!({ "url": "https://example.com/hook", "secrets": SECRET }),
        ),
    ];
    for (id, config) in endpoints {
        producer
            .send(
                FutureRecord::to(&topics.endpoints)
                    .key(id)
                    .payload(&config.to_string()),
                DEADLINE,
            )
            .await
            .expect("endpoint written");
    }

    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("dispatcher.toml");
    let tiers = topics.tiers_toml();
    std::fs::write(
        &config,
        format!(
            r#"group_id = "{group}"
shutdown_grace_ms = 5000

[topics]
retry_tiers = [{tiers}]

[retry]
strategy = "fixed"
base_ms = 200
cap_ms = 200
max_attempts = 3

[outbound]
allow_loopback = true

[admin]
listen = "127.0.0.1:0"
"#,
            group = unique_name("leaks-group"),
        ),
    )
    .expect("config file");
    let mut child = dispatcher("leaks", &topics, &config, dir.path());

    let event = serde_json::json!({
        "event_id": unique_name("evt"), "event_type": "invoice.paid",
        "endpoint_id": "ep-tok", "payload": { "n": 1 },
    });
    producer
        .send(
            FutureRecord::to(&topics.events)
                .key("ep-tok")
                .payload(&event.to_string()),
            DEADLINE,
        )
        .await
        .expect("event written");

    let parked = read_all(&kafka, &topics.dlq, 1, DEADLINE).await;
    let registry = Registry::new(&registry_settings()).expect("registry");
    let value = registry
        .decode(parked[0].payload().expect("a DLQ value"))
        .await
        .expect("decodes");
    let envelope = DlqEnvelope::from_avro_value(value).expect("an envelope");
    assert_eq!(envelope.error_reason, ErrorReason::RetriesExhausted);
    assert_eq!(envelope.attempts, 3);
    assert!(
        !envelope.error_message.contains("SECRETVALUE"),
        "{}",
        envelope.error_message
    );
    assert!(
        envelope.error_message.contains("connect"),
        "{}",
        envelope.error_message
    );
    let endpoint_url = envelope.endpoint_url.clone().expect("the endpoint URL");
    assert!(
        endpoint_url.ends_with("/hook?redacted") && !endpoint_url.contains("SECRETVALUE"),
        "{endpoint_url}"
    );

    // Each failed attempt before the last went to the 200 ms tier (the fixed 200 ms backoff)
    // with its error in a header.
    let mut last_errors = Vec::new();
    for record in read_all(&kafka, &topics.tier_topic("200ms"), 2, DEADLINE).await {
        let Some(headers) = record.headers() else {
            continue;
        };
        for header in headers.iter() {
            if header.key == "hookline-last-error" {
                last_errors
                    .push(String::from_utf8_lossy(header.value.unwrap_or_default()).into_owned());
            }
        }
    }
    assert!(last_errors.len() >= 2, "{last_errors:?}");
    for text in &last_errors {
        assert!(
            text.contains("connect") && !text.contains("SECRETVALUE"),
            "{text}"
        );
    }

    let status = terminate(&mut child).await;
    assert!(status.success(), "{status}");
    let log = std::fs::read_to_string(dir.path().join("leaks.log")).expect("the dispatcher's log");
    assert!(log.contains("parked in the DLQ"), "{log}");
    assert!(!log.contains("SECRETVALUE"), "{log}");
    let warning = log
        .lines()
        .find(|line| line.contains("ep-bad"))
        .expect("a warning about ep-bad");
    assert!(
        warning.contains("`secrets`: invalid type, expected a sequence"),
        "{warning}"
    );
    assert!(!log.contains(SECRET_BODY), "{log}");

    // `endpoints list` warns about the same config, naming the field, not the secret.
    let list = hookline(
        &topics.events,
        &["--endpoints-topic", &topics.endpoints, "endpoints", "list"],
    )
    .await;
    assert!(list.status.success(), "{}", stderr(&list));
    let warning = stderr(&list);
    assert!(
        warning.contains("ep-bad")
            && warning.contains("`secrets`: invalid type, expected a sequence"),
        "{warning}"
    );
    assert!(!warning.contains(SECRET_BODY), "{warning}");
    assert!(!stdout(&list).contains("SECRETVALUE"), "{}", stdout(&list));
}

#[tokio::test(flavor = "multi_thread")]
async fn dlq_inspect_shows_terminal_escapes_escaped() {
    let events = unique_name("cli-dlq-escapes");
    let mut hostile = envelope("ep\u{1b}[31m", ErrorReason::NonRetryableStatus, 0);
    hostile.original_key = Some(b"ep\x1b[31m".to_vec());
    hostile.tenant_id = Some("t\u{1b}]0;pwned\u{7}".into());
    hostile.event_type = Some("a\u{1b}[2J".into());
    hostile.error_message = "HTTP 400: \u{1b}[1;31mdenied\u{1b}[0m\r\nline two".into();
    hostile.original_headers.push(DlqHeader {
        key: "x-note".into(),
        value: Some(b"\x1b[8mhidden".to_vec()),
    });
    stack_with(&events, &[hostile]).await;

    let table = hookline(&events, &["dlq", "inspect", "--output", "table"]).await;
    assert!(table.status.success(), "{}", stderr(&table));
    let text = stdout(&table);
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(text.contains("ep\\x1b[31m"), "{text}");
    assert!(
        text.contains("HTTP 400: \\x1b[1;31mdenied\\x1b[0m"),
        "{text}"
    );
    assert!(text.contains("a\\x1b[2J"), "{text}");

    let summary = hookline(
        &events,
        &["dlq", "inspect", "--summary", "--output", "table"],
    )
    .await;
    let text = stdout(&summary);
    assert!(summary.status.success(), "{}", stderr(&summary));
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(text.contains("t\\x1b]0;pwned\\x07"), "{text}");

    // JSON is escaped by serde: the value is kept, as `\u001b`.
    let json = hookline(&events, &["dlq", "inspect", "--output", "json"]).await;
    let text = stdout(&json);
    assert!(json.status.success(), "{}", stderr(&json));
    assert!(!text.contains('\u{1b}'), "{text:?}");
    let line: serde_json::Value = serde_json::from_str(text.trim()).expect("a JSON line");
    assert_eq!(line["endpoint_id"], "ep\u{1b}[31m");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mistyped_endpoints_file_stops_start_up_naming_the_field_not_the_secret() {
    let topics = TestTopics::new("leaks-file", &["200ms"]);
    topics.create(&kafka_settings(), 1).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let endpoints = dir.path().join("endpoints.toml");
    std::fs::write(
        &endpoints,
        format!(
            "[endpoints.ep-1]\nurl = \"https://example.com/hook\"\nsecrets = \"{SECRET}\"\n\n[endpoints.ep-1.headers]\nAuthorization = \"Bearer tok_TOPSECRET\"\n"
        ),
    )
    .expect("endpoints file");
    let config = dir.path().join("dispatcher.toml");
    std::fs::write(
        &config,
        format!(
            "group_id = \"{}\"\nendpoints_file = {:?}\n\n[topics]\nretry_tiers = [\"200ms\"]\n\n[retry]\nbase_ms = 200\ncap_ms = 200\n\n[admin]\nlisten = \"127.0.0.1:0\"\n",
            unique_name("leaks-file-group"),
            endpoints.display().to_string(),
        ),
    )
    .expect("config file");
    let mut child = dispatcher("leaks-file", &topics, &config, dir.path());
    let status = tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("it stops before the deadline")
        .expect("exit status");
    assert!(!status.success(), "{status}");
    let log = std::fs::read_to_string(dir.path().join("leaks-file.log")).expect("its stderr");
    assert!(
        log.contains(
            "`endpoints.ep-1.secrets`: invalid type, expected a sequence (line 3, column 11)"
        ),
        "{log}"
    );
    assert!(
        !log.contains(SECRET_BODY) && !log.contains("TOPSECRET"),
        "{log}"
    );
}
