//! `hookline outbox` against the real PostgreSQL and Kafka: a relay killed with SIGKILL in
//! the middle of a batch loses nothing (a second relay takes its tasks over when their
//! lease expires), and a malformed task ends FAILED with its error without holding back
//! the tasks behind it, counted and shown by `hookline outbox status`.

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::time::Duration;

use hookline_kafka::{TopicSpec, ensure_topics};
use hookline_testkit::{
    kafka_settings, postgres_url, read_all, registry_settings, unique_name, wait_until,
};
use rdkafka::message::{Headers, Message, OwnedMessage};
use sqlx::PgPool;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const DEADLINE: Duration = Duration::from_secs(60);

struct Db {
    pool: PgPool,
    schema: String,
}

impl Db {
    async fn new(test: &str) -> Db {
        let schema = format!(
            "t_{test}_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let pool = PgPool::connect(&postgres_url()).await.expect("PostgreSQL");
        let db = Db { pool, schema };
        let migrated = hookline(&db, &["outbox", "migrate"])
            .output()
            .await
            .expect("migrate");
        assert!(
            migrated.status.success(),
            "{}",
            String::from_utf8_lossy(&migrated.stderr)
        );
        db
    }

    async fn scalar(&self, sql: &str) -> i64 {
        sqlx::query_scalar(&sql.replace("{s}", &self.schema))
            .fetch_one(&self.pool)
            .await
            .expect(sql)
    }

    async fn drop(self) {
        sqlx::query(&format!("DROP SCHEMA {} CASCADE", self.schema))
            .execute(&self.pool)
            .await
            .expect("drop the schema");
    }
}

/// The binary against the local stack and the test's schema, with `HOOKLINE_OUTBOX__*` set.
fn hookline(db: &Db, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hookline"));
    command
        .arg("--bootstrap-servers")
        .arg(kafka_settings().bootstrap_servers)
        .arg("--registry-url")
        .arg(registry_settings().url)
        .args(args)
        .env_remove("RUST_LOG")
        .env("HOOKLINE_OUTBOX__POSTGRES_URL", postgres_url())
        .env("HOOKLINE_OUTBOX__SCHEMA", &db.schema)
        .env("HOOKLINE_OUTBOX__POLL_INTERVAL_MS", "200")
        .env("HOOKLINE_OUTBOX__BACKOFF_BASE_MS", "200")
        .env("HOOKLINE_OUTBOX__MAINTENANCE_INTERVAL_MS", "300")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

async fn topic() -> String {
    let topic = unique_name("outbox-e2e");
    ensure_topics(&kafka_settings(), &[TopicSpec::new(&topic, 3, 1)])
        .await
        .expect("the topic");
    topic
}

/// Tasks inserted the way another language would: plain SQL.
async fn insert_tasks(db: &Db, count: i64, endpoint: &str) {
    sqlx::query(&format!(
        "INSERT INTO {}.hookline_outbox (id, aggregatetype, aggregateid, type, payload) \
         SELECT gen_random_uuid(), 'endpoint', $1, 'order.created', \
                json_build_object('order', n) FROM generate_series(1, $2) AS n",
        db.schema
    ))
    .bind(endpoint)
    .bind(count)
    .execute(&db.pool)
    .await
    .expect("tasks inserted");
}

fn webhook_id(message: &OwnedMessage) -> String {
    let header = message
        .headers()
        .and_then(|headers| headers.iter().find(|h| h.key == "webhook-id"))
        .and_then(|h| h.value)
        .expect("a webhook-id header");
    String::from_utf8_lossy(header).into_owned()
}

#[tokio::test]
async fn a_relay_killed_mid_batch_loses_nothing() {
    let db = Db::new("outbox_kill").await;
    let topic = topic().await;
    insert_tasks(&db, 3000, "ep_kill").await;
    let relay = |id: &str| {
        let mut command = hookline(
            &db,
            &[
                "--events-topic",
                &topic,
                "outbox",
                "run",
                "--encoding",
                "json",
            ],
        );
        command
            .env("HOOKLINE_OUTBOX__RELAY_ID", id)
            .env("HOOKLINE_OUTBOX__BATCH_SIZE", "100")
            .env("HOOKLINE_OUTBOX__CONCURRENCY", "1")
            .env("HOOKLINE_OUTBOX__LEASE_MS", "3000");
        command.spawn().expect("the relay starts")
    };
    let mut a: Child = relay("relay-a");
    // Kill it while it holds a batch, once it has published some.
    wait_until(DEADLINE, "relay-a holding a batch", || async {
        let held = db
            .scalar("SELECT count(*) FROM {s}.hookline_outbox WHERE status = 'WIP' AND claimed_by = 'relay-a'")
            .await;
        let done = db.scalar("SELECT count(*) FROM {s}.hookline_outbox WHERE status = 'COMPLETE'").await;
        (held > 0 && done > 0).then_some(())
    })
    .await;
    a.start_kill().expect("SIGKILL");
    a.wait().await.expect("relay-a is dead");
    let held: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT id::text FROM {}.hookline_outbox WHERE status = 'WIP' AND claimed_by = 'relay-a'",
        db.schema
    ))
    .fetch_all(&db.pool)
    .await
    .expect("the dead relay's tasks");
    assert!(!held.is_empty(), "relay-a died holding tasks");
    let done_by_a = db
        .scalar("SELECT count(*) FROM {s}.hookline_outbox WHERE status = 'COMPLETE'")
        .await;
    assert!(done_by_a < 3000, "relay-a did not finish everything");

    let mut b = relay("relay-b");
    wait_until(Duration::from_secs(120), "every task COMPLETE", || async {
        (db.scalar("SELECT count(*) FROM {s}.hookline_outbox WHERE status = 'COMPLETE'")
            .await
            == 3000)
            .then_some(())
    })
    .await;
    let records = read_all(&kafka_settings(), &topic, 3000, DEADLINE).await;
    let mut counts: HashMap<String, usize> = HashMap::new();
    for record in &records {
        let id = webhook_id(record);
        let event = hookline_core::WebhookEvent::from_json(record.payload().expect("value"))
            .expect("a JSON event");
        assert_eq!(event.event_id, id, "a copy carries the same event id");
        *counts.entry(id).or_insert(0) += 1;
    }
    let ids: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT id::text FROM {}.hookline_outbox",
        db.schema
    ))
    .fetch_all(&db.pool)
    .await
    .expect("ids");
    let held: HashSet<String> = held.into_iter().collect();
    for id in &ids {
        let copies = counts.get(id).copied().unwrap_or(0);
        assert!(copies >= 1, "task {id} was lost");
        assert!(
            copies == 1 || held.contains(id),
            "task {id} published {copies} times but was not in the killed batch"
        );
    }
    b.start_kill().expect("stop relay-b");
    let _ = b.wait().await;
    db.drop().await;
}

#[tokio::test]
async fn a_malformed_task_ends_failed_without_holding_back_the_others() {
    let db = Db::new("outbox_bad").await;
    let topic = topic().await;
    // A header the publisher refuses (hookline sets Content-Length itself).
    let bad: String = sqlx::query_scalar(&format!(
        "INSERT INTO {}.hookline_outbox (id, aggregatetype, aggregateid, type, payload, headers) \
         VALUES (gen_random_uuid(), 'endpoint', 'ep_bad', 'order.created', '{{}}', \
                 '{{\"Content-Length\": \"1\"}}') RETURNING id::text",
        db.schema
    ))
    .fetch_one(&db.pool)
    .await
    .expect("the bad task");
    insert_tasks(&db, 20, "ep_good").await;
    let mut relay = hookline(
        &db,
        &[
            "--events-topic",
            &topic,
            "outbox",
            "run",
            "--encoding",
            "json",
            "--admin-listen",
            "127.0.0.1:0",
        ],
    )
    .env("HOOKLINE_OUTBOX__MAX_RETRIES", "3")
    .env("HOOKLINE_OUTBOX__RETRY_BASE_MS", "100")
    .spawn()
    .expect("the relay starts");
    let stderr = relay.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let admin = tokio::time::timeout(DEADLINE, async {
        while let Some(line) = lines.next_line().await.expect("stderr line") {
            if let Some(addr) = line.strip_prefix("hookline outbox: admin port listening on ") {
                return addr.to_owned();
            }
        }
        panic!("the relay exited without an admin port");
    })
    .await
    .expect("the admin port in time");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    wait_until(
        DEADLINE,
        "the good tasks COMPLETE and the bad one FAILED",
        || async {
            let done = db
                .scalar("SELECT count(*) FROM {s}.hookline_outbox WHERE status = 'COMPLETE'")
                .await;
            let failed = db
                .scalar("SELECT count(*) FROM {s}.hookline_outbox WHERE status = 'FAILED'")
                .await;
            (done == 20 && failed == 1).then_some(())
        },
    )
    .await;
    let records = read_all(&kafka_settings(), &topic, 20, DEADLINE).await;
    assert_eq!(records.len(), 20);
    assert!(records.iter().all(|r| r.key() == Some(&b"ep_good"[..])));

    let status = hookline(&db, &["outbox", "status", "--output", "json"])
        .output()
        .await
        .expect("status");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&status.stdout).expect("JSON status");
    assert_eq!(json["failed"], 1);
    assert_eq!(json["complete"], 20);
    assert_eq!(json["not_called"], 0);
    let failed = &json["failed_tasks"][0];
    assert_eq!(failed["id"], bad.as_str());
    assert_eq!(failed["retry_count"], 3);
    let error = failed["last_error"].as_str().expect("an error");
    assert!(error.contains("Content-Length"), "{error}");

    let metrics = wait_until(DEADLINE, "the failure counted", || async {
        let body = http_get(&format!("http://{admin}/metrics")).await?;
        body.contains("hookline_outbox_failed_total 1")
            .then_some(body)
    })
    .await;
    assert!(
        metrics.contains("hookline_outbox_published_total 20"),
        "{metrics}"
    );

    let retried = hookline(&db, &["outbox", "retry", &bad])
        .output()
        .await
        .expect("retry");
    assert!(
        retried.status.success(),
        "{}",
        String::from_utf8_lossy(&retried.stderr)
    );
    let again = hookline(&db, &["outbox", "retry", &bad])
        .output()
        .await
        .expect("retry");
    assert!(!again.status.success(), "no FAILED task left to retry");
    relay.start_kill().expect("stop the relay");
    let _ = relay.wait().await;
    db.drop().await;
}

/// A GET with a plain TCP connection (the test needs no HTTP client beyond this).
async fn http_get(url: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/')?;
    let mut stream = tokio::net::TcpStream::connect(host).await.ok()?;
    let request = format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut body = String::new();
    stream.read_to_string(&mut body).await.ok()?;
    Some(body)
}
