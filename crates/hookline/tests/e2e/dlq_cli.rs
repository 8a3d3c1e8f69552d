//! End-to-end tests of `hookline dlq` (the binary) against the real local stack
//! (`deploy/local/stack up`): each test has its own events, DLQ and actions topics, and
//! writes its envelopes framed through the registry, as the dispatcher does.

use std::process::Output;
use std::time::Duration;

use hookline_core::envelope::{DlqEnvelope, DlqHeader, ENVELOPE_VERSION, ErrorReason};
use hookline_core::schema::dlq_envelope_schema;
use hookline_dlq::filter::now_ms;
use hookline_kafka::{Registry, TopicSpec, ensure_topics};
use hookline_testkit::{kafka_settings, registry_settings, unique_name};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::Value;
use tokio::process::Command;

const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `hookline --events-topic <events> <args>` against the local stack.
pub(crate) async fn hookline(events: &str, args: &[&str]) -> Output {
    hookline_with(events, &registry_settings().url, args).await
}

async fn hookline_with(events: &str, registry: &str, args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(["--bootstrap-servers", &kafka_settings().bootstrap_servers])
        .args(["--registry-url", registry, "--events-topic", events])
        .args(args)
        .env_remove("RUST_LOG")
        .env("USER", "cli-tester")
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(DEADLINE, child)
        .await
        .expect("hookline finishes before the deadline")
        .expect("hookline runs")
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json_lines(o: &Output) -> Vec<Value> {
    assert!(o.status.success(), "{}", stderr(o));
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn ids(lines: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = lines
        .iter()
        .map(|l| l["event_id"].as_str().expect("event_id").to_owned())
        .collect();
    ids.sort();
    ids
}

/// The sum of the high watermarks of `topic`, `None` when it does not exist.
fn records_in(topic: &str) -> Option<i64> {
    let mut config = kafka_settings().client_config();
    config.set("allow.auto.create.topics", "false");
    let consumer: BaseConsumer = config.create().expect("client");
    let metadata = consumer.fetch_metadata(Some(topic), DEADLINE).ok()?;
    let t = metadata.topics().first()?;
    if t.error().is_some() || t.partitions().is_empty() {
        return None;
    }
    Some(
        t.partitions()
            .iter()
            .map(|p| {
                consumer
                    .fetch_watermarks(topic, p.id(), DEADLINE)
                    .expect("marks")
                    .1
            })
            .sum(),
    )
}

/// Creates `<events>`, its DLQ and actions topics, and parks `envelopes` in the DLQ.
pub(crate) async fn stack_with(events: &str, envelopes: &[DlqEnvelope]) {
    let kafka = kafka_settings();
    let dlq = format!("{events}.dlq");
    ensure_topics(
        &kafka,
        &[
            TopicSpec::new(events, 1, 1),
            TopicSpec::new(&dlq, 1, 1),
            TopicSpec::new(format!("{events}.dlq-actions"), 1, 1)
                .config("cleanup.policy", "compact"),
        ],
    )
    .await
    .expect("topics");
    let registry = Registry::new(&registry_settings()).expect("registry");
    let producer: FutureProducer = kafka.producer_config().create().expect("producer");
    for e in envelopes {
        let bytes = registry
            .encode_value(&dlq, &envelope_schema(), e.to_avro_value())
            .await
            .expect("encode");
        let key = e.original_key.clone().unwrap_or_default();
        producer
            .send(FutureRecord::to(&dlq).key(&key).payload(&bytes), DEADLINE)
            .await
            .expect("parked");
    }
}

pub(crate) fn envelope(endpoint: &str, reason: ErrorReason, ago_ms: i64) -> DlqEnvelope {
    let event_id = unique_name("evt");
    DlqEnvelope {
        envelope_version: ENVELOPE_VERSION,
        event_type: Some("invoice.paid".into()),
        endpoint_id: Some(endpoint.into()),
        endpoint_url: Some("http://127.0.0.1:9/hook".into()),
        original_topic: "webhook-events".into(),
        original_partition: 0,
        original_offset: 3,
        original_key: Some(endpoint.as_bytes().to_vec()),
        original_payload_bytes: format!(r#"{{"event_id":"{event_id}","n":1}}"#).into_bytes(),
        original_headers: vec![DlqHeader {
            key: "webhook-id".into(),
            value: Some(event_id.clone().into_bytes()),
        }],
        event_id,
        error_reason: reason,
        error_message: "HTTP 503 Service Unavailable".into(),
        last_status_code: Some(503),
        attempts: 3,
        first_attempt_at_ms: Some(now_ms() - ago_ms - 1_000),
        error_timestamp_ms: now_ms() - ago_ms,
        dispatcher_id: "cli-test".into(),
        original_payload_truncated: false,
        original_payload_size: None,
        tenant_id: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn inspect_filters_and_prints_json_tables_and_summaries() {
    let events = unique_name("cli-dlq-inspect");
    let old = envelope("ep-a", ErrorReason::RetriesExhausted, 3 * 3_600_000);
    let recent = envelope("ep-a", ErrorReason::NonRetryableStatus, 60_000);
    let other = envelope("ep-b", ErrorReason::RetriesExhausted, 60_000);
    stack_with(&events, &[old.clone(), recent.clone(), other.clone()]).await;

    let all = json_lines(&hookline(&events, &["dlq", "inspect"]).await);
    assert_eq!(
        ids(&all),
        ids(&[&old, &recent, &other].map(|e| serde_json::json!({"event_id": e.event_id})))
    );
    let first = all
        .iter()
        .find(|l| l["event_id"] == old.event_id.as_str())
        .expect("old");
    assert_eq!(first["original_payload_encoding"], "json");
    assert_eq!(
        first["original_payload"],
        String::from_utf8_lossy(&old.original_payload_bytes).as_ref()
    );
    assert_eq!(first["original_key"], "ep-a");
    assert_eq!(first["error_reason"], "retries_exhausted");
    assert_eq!(first["status"], "open");

    let by_reason = json_lines(
        &hookline(
            &events,
            &["dlq", "inspect", "--reason", "retries_exhausted"],
        )
        .await,
    );
    assert_eq!(ids(&by_reason), {
        let mut v = vec![old.event_id.clone(), other.event_id.clone()];
        v.sort();
        v
    });
    let recent_a = json_lines(
        &hookline(
            &events,
            &["dlq", "inspect", "--endpoint", "ep-a", "--since", "1h"],
        )
        .await,
    );
    assert_eq!(ids(&recent_a), std::slice::from_ref(&recent.event_id));
    let limited = json_lines(&hookline(&events, &["dlq", "inspect", "--limit", "1"]).await);
    assert_eq!(limited.len(), 1);

    let table = hookline(
        &events,
        &[
            "dlq",
            "inspect",
            "--output",
            "table",
            "--event-id",
            &other.event_id,
        ],
    )
    .await;
    assert!(table.status.success(), "{}", stderr(&table));
    let text = stdout(&table);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("PLACE"), "{text}");
    assert!(
        lines[1].contains("retries_exhausted") && lines[1].contains("ep-b"),
        "{text}"
    );

    let summary = hookline(
        &events,
        &["dlq", "inspect", "--summary", "--output", "json"],
    )
    .await;
    let summary: Value = serde_json::from_str(&stdout(&summary)).expect("summary JSON");
    assert_eq!(summary["total"], 3);
    assert_eq!(summary["by_reason"]["retries_exhausted"], 2);
    assert_eq!(summary["by_endpoint"]["ep-a"], 2);
    assert!(
        summary["oldest"].as_str().expect("oldest") < summary["newest"].as_str().expect("newest")
    );
    let text = stdout(
        &hookline(
            &events,
            &["dlq", "inspect", "--summary", "--output", "table"],
        )
        .await,
    );
    assert!(
        text.starts_with("3 records\n") && text.contains("by endpoint:"),
        "{text}"
    );
}

/// `--tenant` selects the deliveries fanned out for a tenant, in `inspect` (which shows the
/// tenant) and `redrive`; direct deliveries (no tenant) match no tenant.
#[tokio::test(flavor = "multi_thread")]
async fn inspect_and_redrive_by_tenant() {
    let events = unique_name("cli-dlq-tenant");
    let of = |endpoint: &str, tenant: Option<&str>| DlqEnvelope {
        tenant_id: tenant.map(str::to_owned),
        ..envelope(endpoint, ErrorReason::RetriesExhausted, 1_000)
    };
    let acme = [of("ep-a", Some("acme")), of("ep-b", Some("acme"))];
    let globex = of("ep-a", Some("globex"));
    let direct = of("ep-a", None);
    let parked = [
        acme[0].clone(),
        acme[1].clone(),
        globex.clone(),
        direct.clone(),
    ];
    stack_with(&events, &parked).await;

    let all = json_lines(&hookline(&events, &["dlq", "inspect"]).await);
    assert_eq!(all.len(), 4);
    let tenant_of = |id: &str| {
        all.iter()
            .find(|l| l["event_id"] == id)
            .map(|l| l["tenant_id"].clone())
    };
    assert_eq!(tenant_of(&acme[0].event_id), Some("acme".into()));
    assert_eq!(tenant_of(&direct.event_id), Some(Value::Null));

    let acme_ids = {
        let mut v: Vec<String> = acme.iter().map(|e| e.event_id.clone()).collect();
        v.sort();
        v
    };
    let only_acme = json_lines(&hookline(&events, &["dlq", "inspect", "--tenant", "acme"]).await);
    assert_eq!(ids(&only_acme), acme_ids);
    let acme_a = json_lines(
        &hookline(
            &events,
            &["dlq", "inspect", "--tenant", "acme", "--endpoint", "ep-a"],
        )
        .await,
    );
    assert_eq!(ids(&acme_a), std::slice::from_ref(&acme[0].event_id));
    let two =
        json_lines(&hookline(&events, &["dlq", "inspect", "--tenant", "globex,nobody"]).await);
    assert_eq!(ids(&two), std::slice::from_ref(&globex.event_id));

    let table = hookline(
        &events,
        &["dlq", "inspect", "--output", "table", "--tenant", "globex"],
    )
    .await;
    let text = stdout(&table);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[1].find("globex"), lines[0].find("TENANT"), "{text}");

    let summary = hookline(
        &events,
        &["dlq", "inspect", "--summary", "--output", "json"],
    )
    .await;
    let summary: Value = serde_json::from_str(&stdout(&summary)).expect("summary JSON");
    assert_eq!(summary["by_tenant"]["acme"], 2);
    assert_eq!(summary["by_tenant"]["globex"], 1);

    let dry = hookline(
        &events,
        &["dlq", "redrive", "--tenant", "acme", "--dry-run"],
    )
    .await;
    assert!(dry.status.success(), "{}", stderr(&dry));
    let dry_text = stdout(&dry);
    assert!(
        dry_text.contains(&format!(
            "event {} endpoint ep-a tenant acme -> {events}\n",
            acme[0].event_id
        )),
        "{dry_text}"
    );
    assert!(dry_text.contains("would redrive 2 records"), "{dry_text}");
    assert_eq!(records_in(&events), Some(0), "a dry run sends nothing");

    let run = hookline(&events, &["dlq", "redrive", "--tenant", "acme"]).await;
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(
        stdout(&run).contains("redrove 2 records; 0 already"),
        "{}",
        stdout(&run)
    );
    assert_eq!(records_in(&events), Some(2));
    let open = json_lines(&hookline(&events, &["dlq", "inspect"]).await);
    let mut left = vec![globex.event_id.clone(), direct.event_id.clone()];
    left.sort();
    assert_eq!(
        ids(&open),
        left,
        "the other tenant and the direct delivery stay open"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn redrive_resolve_and_archive_from_the_command_line() {
    let events = unique_name("cli-dlq-ops");
    let a = envelope("ep-a", ErrorReason::RetriesExhausted, 1_000);
    let b = envelope("ep-b", ErrorReason::RetriesExhausted, 1_000);
    stack_with(&events, &[a.clone(), b.clone()]).await;

    let dry = hookline(
        &events,
        &["dlq", "redrive", "--endpoint", "ep-a", "--dry-run"],
    )
    .await;
    assert!(dry.status.success(), "{}", stderr(&dry));
    assert!(
        stdout(&dry).contains(&format!(
            "would redrive 0/0 event {} endpoint ep-a -> {events}\n",
            a.event_id
        )),
        "{}",
        stdout(&dry)
    );
    assert_eq!(records_in(&events), Some(0), "a dry run sends nothing");

    let run = hookline(
        &events,
        &["dlq", "redrive", "--endpoint", "ep-a", "--rate", "20/s"],
    )
    .await;
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(
        stdout(&run).contains("redrove 1 records; 0 already"),
        "{}",
        stdout(&run)
    );
    assert_eq!(records_in(&events), Some(1));
    let again = hookline(&events, &["dlq", "redrive", "--endpoint", "ep-a"]).await;
    assert!(
        stdout(&again).contains("redrove 0 records; 1 already"),
        "{}",
        stdout(&again)
    );
    assert_eq!(
        records_in(&events),
        Some(1),
        "the second redrive sent nothing"
    );

    let resolve = hookline(
        &events,
        &[
            "dlq",
            "resolve",
            "--endpoint",
            "ep-b",
            "--note",
            "customer gone",
        ],
    )
    .await;
    assert!(resolve.status.success(), "{}", stderr(&resolve));
    assert!(
        stdout(&resolve).contains("resolved 1 records"),
        "{}",
        stdout(&resolve)
    );
    let open = json_lines(&hookline(&events, &["dlq", "inspect"]).await);
    assert!(
        open.is_empty(),
        "redriven and resolved records are hidden: {open:?}"
    );
    let everything = json_lines(&hookline(&events, &["dlq", "inspect", "--all"]).await);
    assert_eq!(everything.len(), 2);
    let resolved = everything
        .iter()
        .find(|l| l["event_id"] == b.event_id.as_str())
        .expect("b");
    assert_eq!(resolved["status"], "resolved");
    assert_eq!(resolved["history"][0]["by"], "cli-tester");
    assert_eq!(resolved["history"][0]["note"], "customer gone");
    let redriven = everything
        .iter()
        .find(|l| l["event_id"] == a.event_id.as_str())
        .expect("a");
    assert_eq!(redriven["status"], "redriven");
    assert!(
        redriven["history"][0]["target"]
            .as_str()
            .expect("target")
            .starts_with(&format!("{events}/0/"))
    );

    let dir = tempfile::tempdir().expect("temp dir");
    for name in ["dlq.avro", "dlq.jsonl"] {
        let path = dir.path().join(name);
        let path_text = path.to_string_lossy().into_owned();
        let archived = hookline(&events, &["dlq", "archive", "--all", "--file", &path_text]).await;
        assert!(archived.status.success(), "{}", stderr(&archived));
        assert!(
            stdout(&archived).starts_with("archived 2 records"),
            "{}",
            stdout(&archived)
        );
        let back = json_lines(
            &hookline(&events, &["dlq", "inspect", "--all", "--file", &path_text]).await,
        );
        assert_eq!(back, everything, "{name} round-trips");
        let refused = hookline(&events, &["dlq", "archive", "--file", &path_text]).await;
        assert!(!refused.status.success() && stderr(&refused).contains("exists already"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_a_clear_error_and_changes_nothing() {
    let events = unique_name("cli-dlq-bad");
    stack_with(&events, &[envelope("ep-a", ErrorReason::BlockedUrl, 1_000)]).await;
    let actions = format!("{events}.dlq-actions");

    let unknown = hookline(
        &events,
        &["dlq", "resolve", "--reason", "timeout", "--note", "x"],
    )
    .await;
    assert!(!unknown.status.success());
    let text = stderr(&unknown);
    assert!(text.contains("unknown error reason `timeout`"), "{text}");
    assert!(
        text.contains("retries_exhausted") && text.contains("blocked_url"),
        "{text}"
    );

    let malformed = hookline(&events, &["dlq", "redrive", "--since", "yesterday"]).await;
    assert!(!malformed.status.success());
    assert!(
        stderr(&malformed).contains("--since `yesterday` is not a time"),
        "{}",
        stderr(&malformed)
    );
    let empty = hookline(
        &events,
        &["dlq", "redrive", "--since", "1h", "--until", "2h"],
    )
    .await;
    assert!(
        stderr(&empty).contains("the time range is empty"),
        "{}",
        stderr(&empty)
    );

    let missing = unique_name("cli-dlq-missing");
    let no_topic = hookline(&missing, &["dlq", "redrive"]).await;
    assert!(!no_topic.status.success());
    assert!(
        stderr(&no_topic).contains(&format!("topic {missing}.dlq does not exist")),
        "{}",
        stderr(&no_topic)
    );
    assert_eq!(
        records_in(&format!("{missing}.dlq")),
        None,
        "nothing was created"
    );

    let down = hookline_with(
        &events,
        "http://127.0.0.1:9/apis/ccompat/v7",
        &["dlq", "redrive"],
    )
    .await;
    assert!(!down.status.success());
    assert!(
        stderr(&down).contains("schema registry") && stderr(&down).contains("127.0.0.1:9"),
        "{}",
        stderr(&down)
    );

    assert_eq!(records_in(&events), Some(0), "nothing was redriven");
    assert_eq!(records_in(&actions), Some(0), "nothing was recorded");
}

/// The envelope schema hookline writes, as JSON (what `to_avro_value` follows).
fn envelope_schema() -> String {
    serde_json::to_string(dlq_envelope_schema()).expect("a schema serializes")
}

#[tokio::test(flavor = "multi_thread")]
async fn inspect_shows_an_avro_original_as_the_event_it_was() {
    let events = unique_name("cli-dlq-original");
    // The original record as `hookline publish` writes it: Avro framed through the registry.
    let event = hookline_core::WebhookEvent {
        event_id: unique_name("evt"),
        event_type: "order.paid".into(),
        endpoint_id: Some("ep-a".into()),
        tenant_id: None,
        channels: Vec::new(),
        endpoint_url: None,
        payload: br#"{"order":42}"#.to_vec(),
        content_type: "application/json".into(),
        headers: Default::default(),
        created_at_ms: 1_700_000_000_000,
        expires_at_ms: None,
    };
    let registry = Registry::new(&registry_settings()).expect("registry");
    let original = registry
        .encode_value(
            &events,
            hookline_core::schema::WEBHOOK_EVENT_CURRENT,
            event.to_avro_value(),
        )
        .await
        .expect("encode the original");
    let mut parked = envelope("ep-a", ErrorReason::RetriesExhausted, 1_000);
    parked.event_id = event.event_id.clone();
    parked.original_payload_bytes = original;
    stack_with(&events, &[parked]).await;

    let lines = json_lines(&hookline(&events, &["dlq", "inspect", "--output", "json"]).await);
    assert_eq!(lines.len(), 1);
    assert_eq!(
        lines[0]["original_payload_encoding"], "base64",
        "the bytes as they were"
    );
    let shown = &lines[0]["original_event"];
    assert_eq!(shown["event_id"], event.event_id.as_str());
    assert_eq!(shown["event_type"], "order.paid");
    assert_eq!(
        shown["payload"],
        serde_json::json!({ "order": 42 }),
        "the webhook body"
    );
}
