//! End-to-end tests of the `hookline` binary against the real local stack (`deploy/local/stack
//! up`): provisioning, publishing from stdin with a bad line, the endpoint table, endpoints of
//! a tenant, and tenant events published to the fan-out topic.

use std::process::{Output, Stdio};
use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_kafka::Registry;
use hookline_testkit::{kafka_settings, read_all, registry_settings, unique_name};
use rdkafka::message::{Message, OwnedMessage};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

const DEADLINE: Duration = Duration::from_secs(30);
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Runs the binary against the local stack with `args`, feeding it `stdin`.
async fn hookline(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookline"))
        .arg("--bootstrap-servers")
        .arg(kafka_settings().bootstrap_servers)
        .arg("--registry-url")
        .arg(registry_settings().url)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the hookline binary starts");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.as_bytes())
        .await
        .expect("write stdin");
    drop(input);
    tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .expect("hookline finishes before the deadline")
        .expect("hookline output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Reads `topic` from the beginning until it has `count` records (and any that follow).
async fn read(topic: &str, count: usize) -> Vec<OwnedMessage> {
    read_all(&kafka_settings(), topic, count, DEADLINE).await
}

#[tokio::test]
async fn topics_create_then_publish_stdin_lines_with_bad_ones() {
    let events = unique_name("cli-events");
    let endpoints = unique_name("cli-endpoints");
    let topics = ["--events-topic", &events, "--endpoints-topic", &endpoints];
    let create = [
        &topics[..],
        &[
            "topics",
            "create",
            "--partitions",
            "2",
            "--tiers",
            "200ms,5s",
        ],
    ]
    .concat();

    let first = hookline(&create, "").await;
    assert!(first.status.success(), "{}", text(&first.stderr));
    let stdout = text(&first.stdout);
    for name in [
        events.clone(),
        format!("{events}.retry.200ms"),
        format!("{events}.retry.5s"),
        format!("{events}.lane"),
        format!("{events}.dlq"),
        endpoints.clone(),
        format!("{events}.cancellations"),
    ] {
        assert!(
            stdout.contains(&format!("created {name}\n")),
            "{name} in {stdout}"
        );
    }
    let again = hookline(&create, "").await;
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(text(&again.stdout).contains(&format!("exists  {events}\n")));
    assert!(!text(&again.stdout).contains("created"));

    let lines = [
        r#"{"event_id":"evt-1","event_type":"invoice.paid","endpoint_id":"ep_1","payload":{"n":1}}"#,
        r#"{"event_type": "invoice.paid", "endpoint_id": "#,
        "",
        r#"{"event_type":"invoice.paid","endpoint_id":"ep_2","payload":{"n":3}}"#,
        r#"{"event_type":"","endpoint_id":"ep_3","payload":{"n":4}}"#,
    ]
    .join("\n");
    let publish = [&topics[..], &["publish", "--stdin"]].concat();
    let output = hookline(&publish, &lines).await;
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(
        !output.status.success(),
        "a bad line fails the run: {stderr}"
    );
    assert!(stderr.contains("line 2: "), "{stderr}");
    assert!(
        stderr.contains("line 5: ") && stderr.contains("event_type"),
        "{stderr}"
    );
    assert!(stderr.contains("error: 2 of 4 events failed"), "{stderr}");
    let published: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("published "))
        .collect();
    assert_eq!(published.len(), 2, "{stdout}");
    let generated_id = published
        .iter()
        .map(|l| l.split(' ').nth(1).expect("an event id"))
        .find(|id| *id != "evt-1")
        .expect("a generated id");

    let registry = Registry::new(&registry_settings()).expect("registry");
    let mut received = Vec::new();
    for record in read(&events, 2).await {
        let value = registry
            .decode(record.payload().expect("value"))
            .await
            .expect("Avro");
        let event = WebhookEvent::from_avro_value(value).expect("an event");
        let endpoint = event.endpoint_id.unwrap_or_default();
        assert_eq!(record.key(), Some(endpoint.as_bytes()));
        received.push((event.event_id, endpoint, text(&event.payload)));
    }
    received.sort();
    let mut expected = vec![
        (
            "evt-1".to_owned(),
            "ep_1".to_owned(),
            r#"{"n":1}"#.to_owned(),
        ),
        (
            generated_id.to_owned(),
            "ep_2".to_owned(),
            r#"{"n":3}"#.to_owned(),
        ),
    ];
    expected.sort();
    assert_eq!(received, expected);

    // One event from arguments, as JSON.
    let json_topic = unique_name("cli-json");
    let single = [
        "--events-topic",
        &json_topic,
        "topics",
        "create",
        "--partitions",
        "1",
    ];
    assert!(hookline(&single, "").await.status.success());
    let args = [
        "--events-topic",
        &json_topic,
        "publish",
        "--endpoint",
        "ep_9",
        "--type",
        "user.created",
        "--data",
        r#"{"id":9}"#,
        "--encoding",
        "json",
        "--event-id",
        "evt-json",
        "--header",
        "X-Tenant=acme",
    ];
    let output = hookline(&args, "").await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).starts_with("published evt-json partition=0 offset=0"));
    let record = &read(&json_topic, 1).await[0];
    let event = WebhookEvent::from_json(record.payload().expect("value")).expect("JSON event");
    assert_eq!(
        (
            event.event_id.as_str(),
            event.event_type.as_str(),
            event.payload.as_slice()
        ),
        ("evt-json", "user.created", &br#"{"id":9}"#[..])
    );
    assert_eq!(
        event.headers.get("X-Tenant").map(String::as_str),
        Some("acme")
    );
}

#[tokio::test]
async fn endpoints_put_list_rm_never_print_the_secret() {
    let endpoints = unique_name("cli-table");
    let table = ["--endpoints-topic", endpoints.as_str()];
    let run = |args: &'static [&'static str]| {
        let all = [&table[..], args].concat();
        async move { hookline(&all, "").await }
    };
    let create = run(&["topics", "create", "--partitions", "1"]).await;
    assert!(create.status.success(), "{}", text(&create.stderr));

    let put = [
        &table[..],
        &[
            "endpoints",
            "put",
            "ep_a",
            "--url",
            "https://a.example/hook",
            "--secret",
            SECRET,
            "--max-concurrency",
            "2",
            "--timeout-ms",
            "5000",
        ],
    ]
    .concat();
    let output = hookline(&put, "").await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(!text(&output.stdout).contains(SECRET));

    let list = run(&["endpoints", "list"]).await;
    let stdout = text(&list.stdout);
    assert!(list.status.success(), "{}", text(&list.stderr));
    assert!(
        stdout.contains("ep_a") && stdout.contains("https://a.example/hook"),
        "{stdout}"
    );
    assert!(
        stdout.contains("whsec_…LaSw") && stdout.contains("concurrency=2"),
        "{stdout}"
    );
    assert!(!stdout.contains(SECRET) && !text(&list.stderr).contains(SECRET));

    let json = run(&["endpoints", "list", "--output", "json"]).await;
    assert!(!text(&json.stdout).contains(SECRET));
    let parsed: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON output");
    assert_eq!(parsed[0]["id"], "ep_a");
    assert_eq!(parsed[0]["secrets"][0], "whsec_…LaSw");
    assert_eq!(parsed[0]["timeout_ms"], 5000);

    let rm = run(&["endpoints", "rm", "ep_a"]).await;
    assert!(rm.status.success(), "{}", text(&rm.stderr));
    let list = run(&["endpoints", "list", "--output", "json"]).await;
    assert_eq!(text(&list.stdout).trim(), "[]");
    let again = run(&["endpoints", "rm", "ep_a"]).await;
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("no endpoint ep_a"),
        "{}",
        text(&again.stderr)
    );

    let invalid = run(&[
        "endpoints",
        "put",
        "ep_b",
        "--url",
        "ftp://b.example/",
        "--secret",
        SECRET,
    ])
    .await;
    assert!(!invalid.status.success());
    let stderr = text(&invalid.stderr);
    assert!(
        stderr.starts_with("error: ") && stderr.contains("url") && !stderr.contains(SECRET),
        "{stderr}"
    );
}

#[tokio::test]
async fn endpoints_put_with_a_tenant_and_list_only_that_tenants() {
    let endpoints = unique_name("cli-tenants");
    let table = ["--endpoints-topic", endpoints.as_str()];
    let run = |args: Vec<&str>| {
        let all: Vec<String> = table.iter().chain(&args).map(|a| a.to_string()).collect();
        async move {
            let all: Vec<&str> = all.iter().map(String::as_str).collect();
            hookline(&all, "").await
        }
    };
    let create = run(vec!["topics", "create", "--partitions", "1"]).await;
    assert!(create.status.success(), "{}", text(&create.stderr));

    let put = |id: &'static str, extra: &'static [&'static str]| {
        let mut args = vec!["endpoints", "put", id, "--url", "https://a.example/hook"];
        args.extend(["--secret", SECRET]);
        args.extend(extra);
        run(args)
    };
    for (id, extra) in [
        (
            "ep_a",
            &[
                "--tenant",
                "acme",
                "--types",
                "invoice.*,customer.created",
                "--channels",
                "eu,beta",
                "--description",
                "billing sync",
            ][..],
        ),
        ("ep_b", &["--tenant", "acme"][..]),
        (
            "ep_c",
            &["--tenant", "globex", "--types", "invoice.paid"][..],
        ),
        ("ep_d", &[][..]),
    ] {
        let output = put(id, extra).await;
        assert!(output.status.success(), "{id}: {}", text(&output.stderr));
    }
    let stdout = text(&put("ep_e", &["--tenant", "acme"]).await.stdout);
    assert!(stdout.contains("tenant acme, types *"), "{stdout}");

    // A bad pattern is refused naming the flag, and nothing is written.
    let bad = put(
        "ep_bad",
        &["--tenant", "acme", "--types", "invoice.*,inv*ce"],
    )
    .await;
    assert!(!bad.status.success());
    let stderr = text(&bad.stderr);
    assert!(
        stderr.starts_with("error: --types: item 2 `inv*ce`: "),
        "{stderr}"
    );
    let no_tenant = put("ep_bad", &["--channels", "eu"]).await;
    assert!(
        text(&no_tenant.stderr).contains("--channels: needs --tenant"),
        "{}",
        text(&no_tenant.stderr)
    );

    let json = run(vec![
        "endpoints",
        "list",
        "--tenant",
        "acme",
        "--output",
        "json",
    ])
    .await;
    assert!(json.status.success(), "{}", text(&json.stderr));
    let parsed: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON output");
    let ids: Vec<&str> = parsed
        .as_array()
        .expect("an array")
        .iter()
        .map(|e| e["id"].as_str().expect("an id"))
        .collect();
    assert_eq!(ids, ["ep_a", "ep_b", "ep_e"], "only acme's, never ep_bad");
    assert_eq!(parsed[0]["tenant"], "acme");
    assert_eq!(
        parsed[0]["event_types"],
        serde_json::json!(["invoice.*", "customer.created"])
    );
    assert_eq!(parsed[0]["channels"], serde_json::json!(["eu", "beta"]));
    assert_eq!(parsed[0]["description"], "billing sync");

    let list = run(vec!["endpoints", "list", "--tenant", "acme"]).await;
    assert!(list.status.success(), "{}", text(&list.stderr));
    let stdout = text(&list.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "a header and acme's three: {stdout}");
    let column = |name: &str| lines[0].find(name).expect(name);
    assert!(lines[0].starts_with("ID"), "{stdout}");
    let ep_a = lines.iter().find(|l| l.starts_with("ep_a")).expect("ep_a");
    assert_eq!(ep_a.find("acme"), Some(column("TENANT")), "{stdout}");
    assert_eq!(
        ep_a.find("invoice.*,customer.created"),
        Some(column("TYPES")),
        "{stdout}"
    );
    assert_eq!(ep_a.find("eu,beta"), Some(column("CHANNELS")), "{stdout}");
    let ep_b = lines.iter().find(|l| l.starts_with("ep_b")).expect("ep_b");
    assert_eq!(
        ep_b.find("* "),
        Some(column("TYPES")),
        "every type: {stdout}"
    );
    assert!(
        !stdout.contains("ep_c") && !stdout.contains("ep_d") && !stdout.contains("globex"),
        "{stdout}"
    );

    let everything = run(vec!["endpoints", "list"]).await;
    let stdout = text(&everything.stdout);
    assert_eq!(stdout.lines().count(), 6, "{stdout}");
    assert!(stdout.contains("globex"), "{stdout}");
    let nobody = run(vec![
        "endpoints",
        "list",
        "--tenant",
        "nobody",
        "--output",
        "json",
    ])
    .await;
    assert_eq!(text(&nobody.stdout).trim(), "[]");
}

#[tokio::test]
async fn publish_a_tenant_event_to_the_fanout_topic() {
    let events = unique_name("cli-fanout");
    let fanout = format!("{events}.fanout");
    let topics = ["--events-topic", events.as_str()];
    let create = [&topics[..], &["topics", "create", "--partitions", "1"]].concat();
    let created = hookline(&create, "").await;
    assert!(created.status.success(), "{}", text(&created.stderr));
    assert!(
        text(&created.stdout).contains(&format!("created {fanout}\n")),
        "{}",
        text(&created.stdout)
    );

    let both = [
        &topics[..],
        &[
            "publish",
            "--endpoint",
            "ep_1",
            "--tenant",
            "acme",
            "--type",
            "invoice.paid",
            "--data",
            "{}",
        ],
    ]
    .concat();
    let refused = hookline(&both, "").await;
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("give --endpoint")
            && text(&refused.stderr).contains("or --tenant")
            && text(&refused.stderr).contains("not both"),
        "{}",
        text(&refused.stderr)
    );

    // Avro, through the registry, with channels.
    let avro = [
        &topics[..],
        &[
            "publish",
            "--tenant",
            "acme",
            "--type",
            "invoice.paid",
            "--data",
            r#"{"invoice":42}"#,
            "--channels",
            "eu,beta",
            "--event-id",
            "evt-tenant-avro",
        ],
    ]
    .concat();
    let output = hookline(&avro, "").await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.starts_with("published evt-tenant-avro partition=0 offset=0 ")
            && stdout.contains(&format!("topic={fanout} tenant=acme")),
        "{stdout}"
    );

    // JSON, and a full event with tenant_id on stdin.
    let json = [
        &topics[..],
        &[
            "publish",
            "--tenant",
            "acme",
            "--type",
            "customer.created",
            "--data",
            r#"{"customer":7}"#,
            "--encoding",
            "json",
            "--event-id",
            "evt-tenant-json",
        ],
    ]
    .concat();
    let output = hookline(&json, "").await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let line = r#"{"event_id":"evt-tenant-line","event_type":"invoice.paid","tenant_id":"globex","channels":["us"],"payload":{"n":1}}"#;
    let stdin = [&topics[..], &["publish", "--stdin", "--encoding", "json"]].concat();
    let output = hookline(&stdin, line).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains(&format!("published 1 of 1 events to {fanout}")),
        "{}",
        text(&output.stderr)
    );

    let registry = Registry::new(&registry_settings()).expect("registry");
    let records = read(&fanout, 3).await;
    assert_eq!(records.len(), 3);
    let avro_event = {
        let value = registry
            .decode(records[0].payload().expect("value"))
            .await
            .expect("Avro through the registry");
        WebhookEvent::from_avro_value(value).expect("an event")
    };
    let json_event =
        WebhookEvent::from_json(records[1].payload().expect("value")).expect("a JSON event");
    let line_event =
        WebhookEvent::from_json(records[2].payload().expect("value")).expect("a JSON event");
    for (record, event, id, tenant) in [
        (&records[0], &avro_event, "evt-tenant-avro", "acme"),
        (&records[1], &json_event, "evt-tenant-json", "acme"),
        (&records[2], &line_event, "evt-tenant-line", "globex"),
    ] {
        assert_eq!(record.key(), Some(tenant.as_bytes()), "keyed by the tenant");
        assert_eq!(event.event_id, id);
        assert_eq!(event.tenant_id.as_deref(), Some(tenant));
        assert_eq!(event.endpoint_id, None, "a tenant event names no endpoint");
    }
    assert_eq!(avro_event.event_type, "invoice.paid");
    assert_eq!(avro_event.channels, ["eu", "beta"]);
    assert_eq!(avro_event.payload, br#"{"invoice":42}"#);
    assert!(json_event.channels.is_empty());
    assert_eq!(line_event.channels, ["us"]);
}
