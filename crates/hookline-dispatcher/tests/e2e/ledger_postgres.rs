//! End-to-end tests of the PostgreSQL delivery ledger: the real local stack (broker,
//! registry and the stack's PostgreSQL, `HOOKLINE_TEST_POSTGRES`), a real HTTP receiver on
//! 127.0.0.1:0, and each test's ledger tables in a schema of its own.

use std::time::Duration;

use hookline_core::secret::Secret;
use hookline_dispatcher::DispatcherConfig;
use hookline_testkit::{Reply, wait_until};
use sqlx::Row;

use crate::harness::{Harness, event};

const DELIVERED: &str = r#"webhook_delivery_total{status="succeeded"}"#;
const SUPPRESSED: &str = r#"webhook_delivery_total{status="duplicate_suppressed"}"#;

fn test_url() -> String {
    hookline_testkit::postgres_url()
}

fn schema(test: &str) -> String {
    format!("e2e_{test}_{}_{:x}", std::process::id(), rand_suffix())
}

fn rand_suffix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
}

fn config(h: &Harness, schema: &str) -> DispatcherConfig {
    let mut config = h.config();
    config.ledger.postgres_url = Some(Secret::new(test_url()));
    config.ledger.postgres_schema = schema.to_owned();
    config.ledger.timeout_ms = 2_000;
    config
}

async fn db(schema: &str) -> sqlx::PgPool {
    let url = format!("{}?options=-csearch_path%3D{schema}", test_url());
    sqlx::PgPool::connect(&url)
        .await
        .expect("connect to the stack's PostgreSQL")
}

async fn trail(schema: &str, endpoint: &str, event_id: &str) -> Vec<String> {
    sqlx::query(
        "SELECT coalesce(from_status, '-') || '->' || to_status FROM webhook_delivery_transitions \
         WHERE endpoint_id = $1 AND event_id = $2 ORDER BY id",
    )
    .bind(endpoint)
    .bind(event_id)
    .fetch_all(&db(schema).await)
    .await
    .expect("transitions")
    .into_iter()
    .map(|row| row.get::<String, _>(0))
    .collect()
}

/// Whether the delivery's row holds a lease that has not run out (`None`: no row).
async fn lease_live(schema: &str, endpoint: &str, event_id: &str) -> Option<bool> {
    sqlx::query_scalar(
        "SELECT coalesce(lease_expires_at > now(), false) FROM webhook_deliveries \
         WHERE endpoint_id = $1 AND event_id = $2",
    )
    .bind(endpoint)
    .bind(event_id)
    .fetch_optional(&db(schema).await)
    .await
    .expect("the delivery's lease")
}

async fn drop_schema(schema: &str) {
    let pool = sqlx::PgPool::connect(&test_url()).await.expect("connect");
    sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .execute(&pool)
        .await
        .expect("drop schema");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_delivered_event_is_not_sent_again_and_is_audited() {
    let mut h = Harness::new("pgledger-dup").await;
    let schema = schema("dup");
    let url = h.receiver.script("pgdup", |_| Reply::Status(204));
    h.put_endpoint("ep-pgdup", serde_json::json!({ "url": url }))
        .await;
    h.start(config(&h, &schema)).await;

    let event = event("ep-pgdup", 1);
    h.publish_json(&event).await;
    h.wait_for_metric(DELIVERED, 1).await;
    h.publish_json(&event).await;
    h.wait_for_metric(SUPPRESSED, 1).await;
    assert_eq!(h.receiver.count("pgdup"), 1, "delivered once");
    let row = sqlx::query(
        "SELECT status, attempts, last_status, lease_owner FROM webhook_deliveries \
         WHERE endpoint_id = 'ep-pgdup' AND event_id = $1",
    )
    .bind(&event.event_id)
    .fetch_one(&db(&schema).await)
    .await
    .expect("the delivery's row");
    assert_eq!(row.get::<String, _>("status"), "Succeeded");
    assert_eq!(row.get::<i32, _>("attempts"), 1);
    assert_eq!(row.get::<Option<i32>, _>("last_status"), Some(204));
    assert_eq!(row.get::<Option<String>, _>("lease_owner"), None);
    assert_eq!(
        trail(&schema, "ep-pgdup", &event.event_id).await,
        ["Received->Processing", "Processing->Succeeded"]
    );
    assert_eq!(
        h.metric_sum("webhook_ledger_errors_total"),
        0,
        "{}",
        h.metrics()
    );
    h.stop().await;
    drop_schema(&schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_two_copies_in_flight_make_one_attempt() {
    let mut h = Harness::new("pgledger-inflight").await;
    let schema = schema("inflight");
    // Slow enough (within http.timeout_ms, 2 s) that the second copy arrives while the
    // first is being delivered.
    let url = h.receiver.script("pgslow", |_| Reply::Slow {
        delay_ms: 1_200,
        status: 200,
    });
    h.put_endpoint("ep-pgslow", serde_json::json!({ "url": url }))
        .await;
    h.start(config(&h, &schema)).await;

    let event = event("ep-pgslow", 1);
    h.publish_json(&event).await;
    h.publish_json(&event).await;
    // The second copy finds the first under its lease: put off to a tier, not sent; it comes
    // back after the first succeeded and is suppressed.
    h.wait_for_metric(DELIVERED, 1).await;
    h.wait_for_metric(SUPPRESSED, 1).await;
    assert_eq!(h.receiver.count("pgslow"), 1, "one HTTP attempt");
    assert!(
        h.metrics().contains(r#"why="in_flight""#),
        "the second copy was deferred: {}",
        h.metrics()
    );
    let trail = trail(&schema, "ep-pgslow", &event.event_id).await;
    assert_eq!(trail, ["Received->Processing", "Processing->Succeeded"]);
    h.stop().await;
    drop_schema(&schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_unreachable_deliveries_go_on_and_errors_are_counted() {
    let mut h = Harness::new("pgledger-down").await;
    let url = h.receiver.script("pgdown", |_| Reply::Status(200));
    h.put_endpoint("ep-pgdown", serde_json::json!({ "url": url }))
        .await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let mut config = config(&h, "public");
    config.ledger.postgres_url = Some(Secret::new(format!(
        "postgres://hookline:s3cretpw@127.0.0.1:{port}/hookline"
    )));
    config.ledger.timeout_ms = 300;
    h.start(config).await;
    for n in 0..3 {
        h.publish_json(&event("ep-pgdown", n)).await;
    }
    h.wait_for_requests("pgdown", 3).await;
    h.wait_for_metric(DELIVERED, 3).await;
    let metrics = h.metrics();
    assert!(
        metrics.contains(r#"webhook_ledger_errors_total{store="postgres",op="claim"}"#),
        "{metrics}"
    );
    assert!(
        h.metric_sum("webhook_ledger_errors_total") >= 6,
        "{metrics}"
    );
    assert!(!metrics.contains("s3cretpw"));
    assert_eq!(h.metric_sum("webhook_dlq_total"), 0, "{metrics}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_delivery_stopped_before_its_attempt_gives_its_lease_back() {
    let mut h = Harness::new("pgledger-stop").await;
    let schema = schema("stop");
    // The first request never gets an answer; the endpoint takes one request at a time, so
    // the second event waits for it, under its lease, when the dispatcher stops.
    let url = h.receiver.script("pgstop", |n| {
        if n == 0 {
            Reply::Hang
        } else {
            Reply::Status(200)
        }
    });
    h.put_endpoint(
        "ep-pgstop",
        serde_json::json!({ "url": url, "max_concurrency": 1 }),
    )
    .await;
    let mut config = config(&h, &schema);
    config.ledger.lease_ms = 300_000;
    config.http.timeout_ms = 60_000;
    config.shutdown_grace_ms = 300;
    h.start(config.clone()).await;

    let first = event("ep-pgstop", 1);
    let second = event("ep-pgstop", 2);
    h.publish_json(&first).await;
    h.wait_for_requests("pgstop", 1).await;
    h.publish_json(&second).await;
    wait_until(
        Duration::from_secs(30),
        "the second delivery takes its lease",
        || async {
            (lease_live(&schema, "ep-pgstop", &second.event_id).await == Some(true)).then_some(())
        },
    )
    .await;
    h.stop().await;

    // Stopped while it waited for the endpoint, the second gives its lease back; the first,
    // stopped while the endpoint had its request, keeps its own until it runs out.
    assert_eq!(
        lease_live(&schema, "ep-pgstop", &second.event_id).await,
        Some(false),
        "the second delivery's lease was given back"
    );
    assert_eq!(
        lease_live(&schema, "ep-pgstop", &first.event_id).await,
        Some(true),
        "the first delivery's lease is kept"
    );

    // The partition's next owner (the same group again) delivers the second at once; the
    // first is put off while its lease lives, not sent beside the request still out.
    h.start(config).await;
    let ids = |h: &Harness| -> Vec<String> {
        h.receiver
            .received("pgstop")
            .iter()
            .filter_map(|r| r.header("webhook-id").map(str::to_owned))
            .collect()
    };
    wait_until(
        Duration::from_secs(30),
        "the second event is delivered by the next dispatcher",
        || async { ids(&h).contains(&second.event_id).then_some(()) },
    )
    .await;
    wait_until(
        Duration::from_secs(30),
        "the first event is put off under its lease",
        || async { h.metrics().contains(r#"why="in_flight""#).then_some(()) },
    )
    .await;
    assert_eq!(
        ids(&h).iter().filter(|id| **id == first.event_id).count(),
        1,
        "the first event was not sent again under its lease"
    );
    assert_eq!(
        trail(&schema, "ep-pgstop", &second.event_id).await,
        [
            "Received->Processing",
            "Processing->Processing",
            "Processing->Succeeded"
        ]
    );
    h.stop().await;
    drop_schema(&schema).await;
}
