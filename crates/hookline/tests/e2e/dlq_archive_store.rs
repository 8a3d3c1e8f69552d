//! End-to-end tests of `hookline dlq archive --to` and `hookline dlq inspect --file` with
//! object storage: a real S3-compatible server (moto's server mode, installed by
//! `deploy/s3-test-server`) started by each test on 127.0.0.1, the local stack's Kafka and
//! registry, and local directories.

use std::collections::BTreeSet;
use std::process::{Output, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use apache_avro::types::Value as AvroValue;
use futures::TryStreamExt;
use hookline_core::envelope::{DlqEnvelope, ErrorReason};
use hookline_testkit::{kafka_settings, registry_settings, unique_name};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::dlq_cli::{envelope, stack_with, stderr, stdout};

const DEADLINE: Duration = Duration::from_secs(60);
const DAY_MS: i64 = 86_400_000;
const BUCKET: &str = "dlq-archive";

/// The `moto_server` of `deploy/s3-test-server` (installed on first use), or
/// `HOOKLINE_TEST_MOTO_SERVER`.
fn moto_server() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Ok(path) = std::env::var("HOOKLINE_TEST_MOTO_SERVER") {
            return path;
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/s3-test-server");
        let out = std::process::Command::new("bash")
            .arg(script)
            .stderr(Stdio::inherit())
            .output()
            .expect("deploy/s3-test-server runs");
        assert!(out.status.success(), "deploy/s3-test-server failed");
        String::from_utf8(out.stdout)
            .expect("a path")
            .trim()
            .to_owned()
    })
}

/// A moto S3 server on 127.0.0.1 on a port of its own, stopped when dropped.
struct S3Server {
    _child: Child,
    endpoint: String,
}

impl S3Server {
    async fn start() -> S3Server {
        let moto = tokio::task::spawn_blocking(moto_server)
            .await
            .expect("installed");
        let mut child = Command::new(moto)
            .args(["-H", "127.0.0.1", "-p", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("moto_server starts");
        // werkzeug says where it listens: ` * Running on http://127.0.0.1:<port>`.
        let mut lines = output_lines(&mut child);
        let endpoint = tokio::time::timeout(DEADLINE, async {
            while let Some(line) = lines.recv().await {
                if let Some(at) = line.find("http://127.0.0.1:") {
                    let url = line[at..].split_whitespace().next().unwrap_or_default();
                    return url.trim_end_matches('/').to_owned();
                }
            }
            panic!("moto_server ended without listening");
        })
        .await
        .expect("moto_server listens before the deadline");
        let server = S3Server {
            _child: child,
            endpoint,
        };
        let created = reqwest::Client::new()
            .put(format!("{}/{BUCKET}", server.endpoint))
            .send()
            .await
            .expect("moto answers");
        assert!(
            created.status().is_success(),
            "bucket: {}",
            created.status()
        );
        server
    }

    /// `HOOKLINE_ARCHIVE__*` variables that reach this server.
    fn env(&self) -> Vec<(String, String)> {
        [
            ("ENDPOINT_URL", self.endpoint.as_str()),
            ("ALLOW_HTTP", "true"),
            ("REGION", "us-east-1"),
            ("ACCESS_KEY_ID", "testing"),
            ("SECRET_ACCESS_KEY", "testing-secret"),
        ]
        .into_iter()
        .map(|(k, v)| (format!("HOOKLINE_ARCHIVE__{k}"), v.to_owned()))
        .collect()
    }

    /// A client of the bucket, as a user's own tools would list it.
    fn bucket(&self, name: &str) -> Arc<dyn ObjectStore> {
        let store = AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_bucket_name(name)
            .with_access_key_id("testing")
            .with_secret_access_key("testing-secret")
            .build()
            .expect("a client");
        Arc::new(store)
    }
}

/// The lines a child writes on stdout and stderr (moto logs on either, by version), as
/// they come; read to the end, so that it never blocks on a full pipe.
fn output_lines(child: &mut Child) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (send, lines) = tokio::sync::mpsc::unbounded_channel();
    fn forward(
        input: impl tokio::io::AsyncRead + Unpin + Send + 'static,
        send: tokio::sync::mpsc::UnboundedSender<String>,
    ) {
        tokio::spawn(async move {
            let mut input = BufReader::new(input).lines();
            while let Ok(Some(line)) = input.next_line().await {
                // The test may stop listening: the rest is still read and dropped.
                let _ = send.send(line);
            }
        });
    }
    forward(child.stderr.take().expect("stderr"), send.clone());
    forward(child.stdout.take().expect("stdout"), send);
    lines
}

/// Runs `hookline --events-topic <events> <args>` with `env` added.
async fn hookline(events: &str, args: &[&str], env: &[(String, String)]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(["--bootstrap-servers", &kafka_settings().bootstrap_servers])
        .args([
            "--registry-url",
            &registry_settings().url,
            "--events-topic",
            events,
        ])
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("HOOKLINE_CONFIG")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("USER", "archive-tester")
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(DEADLINE, child)
        .await
        .expect("hookline finishes before the deadline")
        .expect("hookline runs")
}

fn json_lines(o: &Output) -> Vec<Value> {
    assert!(o.status.success(), "{}", stderr(o));
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The records' lines sorted by event id, for comparing sources read in other orders.
fn by_id(mut lines: Vec<Value>) -> Vec<Value> {
    lines.sort_by(|a, b| a["event_id"].as_str().cmp(&b["event_id"].as_str()));
    lines
}

fn ids(lines: &[Value]) -> BTreeSet<String> {
    lines
        .iter()
        .map(|l| l["event_id"].as_str().expect("event_id").to_owned())
        .collect()
}

fn ids_of(envelopes: &[&DlqEnvelope]) -> BTreeSet<String> {
    envelopes.iter().map(|e| e.event_id.clone()).collect()
}

/// `<yyyy>/<mm>/<dd>` of a park time, in UTC.
fn day_folder(error_timestamp_ms: i64) -> String {
    jiff::Timestamp::from_millisecond(error_timestamp_ms)
        .expect("a time")
        .strftime("%Y/%m/%d")
        .to_string()
}

async fn keys(store: &dyn ObjectStore) -> Vec<String> {
    let listed: Vec<_> = store.list(None).try_collect().await.expect("listed");
    let mut keys: Vec<String> = listed.into_iter().map(|m| m.location.to_string()).collect();
    keys.sort();
    keys
}

async fn object(store: &dyn ObjectStore, key: &str) -> Vec<u8> {
    let got = store.get(&ObjectPath::from(key)).await.expect("the object");
    got.bytes().await.expect("its bytes").to_vec()
}

fn field<'a>(fields: &'a [(String, AvroValue)], name: &str) -> &'a AvroValue {
    let value = &fields
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no field {name}"))
        .1;
    match value {
        AvroValue::Union(_, inner) => inner,
        v => v,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn archive_to_s3_lays_out_objects_by_day_and_inspect_reads_them_back() {
    let s3 = S3Server::start().await;
    let env = s3.env();
    let events = unique_name("cli-archive-s3");
    let dlq = format!("{events}.dlq");
    let old = envelope("ep-a", ErrorReason::RetriesExhausted, 2 * DAY_MS);
    let a = envelope("ep-a", ErrorReason::NonRetryableStatus, 1_000);
    let b = envelope("ep-b", ErrorReason::RetriesExhausted, 1_000);
    stack_with(&events, &[old.clone(), a.clone(), b.clone()]).await;
    let to = format!("s3://{BUCKET}/pre/fix/");

    let run = hookline(&events, &["dlq", "archive", "--all", "--to", &to], &env).await;
    assert!(run.status.success(), "{}", stderr(&run));
    let days: BTreeSet<String> = [&old, &a, &b]
        .iter()
        .map(|e| day_folder(e.error_timestamp_ms))
        .collect();
    let text = stdout(&run);
    assert!(
        text.contains(&format!("archived 3 records in {} objects (", days.len()))
            && text.trim_end().ends_with(&format!("bytes) to {to}")),
        "{text}"
    );

    let bucket = s3.bucket(BUCKET);
    let first_run = keys(bucket.as_ref()).await;
    assert_eq!(first_run.len(), days.len(), "{first_run:?}");
    let folders: BTreeSet<String> = first_run
        .iter()
        .map(|k| k.rsplit_once('/').expect("a folder").0.to_owned())
        .collect();
    let expected: BTreeSet<String> = days.iter().map(|d| format!("pre/fix/{dlq}/{d}")).collect();
    assert_eq!(folders, expected);
    for key in &first_run {
        assert!(key.ends_with(".avro"), "{key}");
        assert!(
            text.contains(&format!("wrote s3://{BUCKET}/{key}: ")),
            "{key} is reported: {text}"
        );
    }

    // The old record's object, read as any Avro reader would.
    let old_key = first_run
        .iter()
        .find(|k| k.contains(&day_folder(old.error_timestamp_ms)))
        .expect("the old day's object")
        .clone();
    let bytes = object(bucket.as_ref(), &old_key).await;
    let reader = apache_avro::Reader::new(bytes.as_slice()).expect("an object container");
    match reader.writer_schema() {
        apache_avro::Schema::Record(r) => {
            assert_eq!(r.name.fullname(None), "dev.hookline.DlqArchiveRecord")
        }
        other => panic!("schema {other:?}"),
    }
    assert_eq!(
        reader
            .user_metadata()
            .get("hookline.dlq.topic")
            .map(Vec::as_slice),
        Some(dlq.as_bytes())
    );
    let records: Vec<AvroValue> = reader.map(|r| r.expect("a record")).collect();
    assert_eq!(records.len(), 1);
    let AvroValue::Record(fields) = &records[0] else {
        panic!("not a record");
    };
    let AvroValue::Record(envelope_fields) = field(fields, "envelope") else {
        panic!("no envelope");
    };
    assert_eq!(
        field(envelope_fields, "event_id"),
        &AvroValue::String(old.event_id.clone())
    );
    assert_eq!(
        field(envelope_fields, "original_payload_bytes"),
        &AvroValue::Bytes(old.original_payload_bytes.clone())
    );
    assert_eq!(
        field(envelope_fields, "endpoint_id"),
        &AvroValue::String("ep-a".into())
    );
    assert_eq!(field(fields, "status"), &AvroValue::String("open".into()));

    // Read back: the same lines as from the topic, filters applied.
    let from_topic = by_id(json_lines(
        &hookline(&events, &["dlq", "inspect", "--all"], &env).await,
    ));
    let from_archive = by_id(json_lines(
        &hookline(&events, &["dlq", "inspect", "--all", "--file", &to], &env).await,
    ));
    assert_eq!(from_archive, from_topic);
    assert_eq!(ids(&from_archive), ids_of(&[&old, &a, &b]));
    let ep_b = json_lines(
        &hookline(
            &events,
            &["dlq", "inspect", "--file", &to, "--endpoint", "ep-b"],
            &env,
        )
        .await,
    );
    assert_eq!(ids(&ep_b), ids_of(&[&b]));
    assert_eq!(ep_b[0]["error_reason"], "retries_exhausted");
    let reason = json_lines(
        &hookline(
            &events,
            &[
                "dlq",
                "inspect",
                "--file",
                &to,
                "--reason",
                "non_retryable_status",
            ],
            &env,
        )
        .await,
    );
    assert_eq!(ids(&reason), ids_of(&[&a]));
    let recent = json_lines(
        &hookline(
            &events,
            &["dlq", "inspect", "--file", &to, "--since", "1d"],
            &env,
        )
        .await,
    );
    assert_eq!(ids(&recent), ids_of(&[&a, &b]));
    let one = format!("s3://{BUCKET}/{old_key}");
    let single = json_lines(&hookline(&events, &["dlq", "inspect", "--file", &one], &env).await);
    assert_eq!(ids(&single), ids_of(&[&old]));
    let summary = hookline(
        &events,
        &[
            "dlq",
            "inspect",
            "--file",
            &to,
            "--summary",
            "--output",
            "json",
        ],
        &env,
    )
    .await;
    assert!(summary.status.success(), "{}", stderr(&summary));
    let summary: Value = serde_json::from_str(stdout(&summary).trim()).expect("a summary");
    assert_eq!(summary["total"], 3, "{summary}");

    // A second run adds objects of its own; the first run's are unchanged.
    let again = hookline(&events, &["dlq", "archive", "--all", "--to", &to], &env).await;
    assert!(again.status.success(), "{}", stderr(&again));
    let both_runs = keys(bucket.as_ref()).await;
    assert_eq!(both_runs.len(), 2 * first_run.len(), "{both_runs:?}");
    assert!(first_run.iter().all(|k| both_runs.contains(k)));
    assert_eq!(object(bucket.as_ref(), &old_key).await, bytes);
    let twice = json_lines(&hookline(&events, &["dlq", "inspect", "--file", &to], &env).await);
    assert_eq!(twice.len(), 6, "both runs read back");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_upload_or_bad_setting_exits_non_zero_and_writes_nothing() {
    let s3 = S3Server::start().await;
    let env = s3.env();
    let events = unique_name("cli-archive-fail");
    stack_with(
        &events,
        &[envelope("ep-a", ErrorReason::RetriesExhausted, 1_000)],
    )
    .await;

    let missing = hookline(
        &events,
        &["dlq", "archive", "--to", "s3://no-such-bucket/p/"],
        &env,
    )
    .await;
    assert!(!missing.status.success());
    let error = stderr(&missing);
    assert!(
        error.contains("archive s3://no-such-bucket/p/")
            && error.contains("starting the upload")
            && error.contains("NoSuchBucket"),
        "{error}"
    );
    assert!(!error.contains("testing-secret"), "{error}");
    assert!(stdout(&missing).is_empty(), "{}", stdout(&missing));
    assert!(keys(s3.bucket(BUCKET).as_ref()).await.is_empty());
    let listed: Result<Vec<_>, _> = s3.bucket("no-such-bucket").list(None).try_collect().await;
    assert!(listed.is_err(), "the bucket was not made");

    let unsupported = hookline(
        &events,
        &["dlq", "archive", "--to", "http://127.0.0.1:9/p/"],
        &env,
    )
    .await;
    assert!(!unsupported.status.success());
    assert!(
        stderr(&unsupported).contains("`http://` is not supported: use s3://"),
        "{}",
        stderr(&unsupported)
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("hookline.toml");
    std::fs::write(&config, "[archive]\nallow_htp = true\n").expect("config");
    let typo = hookline(
        &events,
        &[
            "dlq",
            "archive",
            "--to",
            "s3://dlq-archive/p/",
            "--config",
            &config.display().to_string(),
        ],
        &[],
    )
    .await;
    assert!(!typo.status.success());
    assert!(
        stderr(&typo).contains("archive.allow_htp"),
        "{}",
        stderr(&typo)
    );
    let no_secret: Vec<(String, String)> = env
        .iter()
        .filter(|(k, _)| k != "HOOKLINE_ARCHIVE__SECRET_ACCESS_KEY")
        .cloned()
        .collect();
    let half = hookline(
        &events,
        &["dlq", "archive", "--to", "s3://dlq-archive/p/"],
        &no_secret,
    )
    .await;
    assert!(!half.status.success());
    assert!(
        stderr(&half).contains("archive.secret_access_key: is missing"),
        "{}",
        stderr(&half)
    );
    assert!(keys(s3.bucket(BUCKET).as_ref()).await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn archive_to_a_local_directory_or_file_url_and_read_it_back() {
    let events = unique_name("cli-archive-dir");
    let dlq = format!("{events}.dlq");
    let old = envelope("ep-a", ErrorReason::RetriesExhausted, 3 * DAY_MS);
    let new = envelope("ep-b", ErrorReason::RetriesExhausted, 1_000);
    stack_with(&events, &[old.clone(), new.clone()]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let from_topic = by_id(json_lines(
        &hookline(&events, &["dlq", "inspect", "--all"], &[]).await,
    ));

    let plain = dir.path().join("plain");
    let file_url = format!("file://{}/by-url/", dir.path().display());
    for (to, root) in [
        (plain.display().to_string(), plain.clone()),
        (file_url.clone(), dir.path().join("by-url")),
    ] {
        let run = hookline(&events, &["dlq", "archive", "--to", &to], &[]).await;
        assert!(run.status.success(), "{}", stderr(&run));
        assert!(
            stdout(&run).contains("archived 2 records in 2 objects"),
            "{}",
            stdout(&run)
        );
        for e in [&old, &new] {
            let folder = root.join(&dlq).join(day_folder(e.error_timestamp_ms));
            let names: Vec<String> = std::fs::read_dir(&folder)
                .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
                .map(|f| f.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(names.len(), 1, "{names:?}");
            assert!(names[0].ends_with(".avro"), "{names:?}");
        }
        let back = by_id(json_lines(
            &hookline(&events, &["dlq", "inspect", "--all", "--file", &to], &[]).await,
        ));
        assert_eq!(back, from_topic, "{to}");
    }
    // One object by its path, as the file archive is read.
    let folder = plain.join(&dlq).join(day_folder(old.error_timestamp_ms));
    let object = std::fs::read_dir(&folder)
        .expect("folder")
        .next()
        .expect("an object")
        .expect("entry")
        .path();
    let one = json_lines(
        &hookline(
            &events,
            &["dlq", "inspect", "--file", &object.display().to_string()],
            &[],
        )
        .await,
    );
    assert_eq!(ids(&one), ids_of(&[&old]));
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).expect("dir");
    let nothing = hookline(
        &events,
        &["dlq", "inspect", "--file", &empty.display().to_string()],
        &[],
    )
    .await;
    assert!(!nothing.status.success());
    assert!(
        stderr(&nothing).contains("no .avro objects there"),
        "{}",
        stderr(&nothing)
    );
}
