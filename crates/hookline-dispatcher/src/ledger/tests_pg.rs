//! The PostgreSQL ledger's state transitions against the real PostgreSQL of the local stack
//! (`HOOKLINE_TEST_POSTGRES`, else the stack's default port and password file); each test
//! in a schema of its own, dropped at the end.

use std::time::{Duration, Instant};

use hookline_core::secret::Secret;
use sqlx::Row;

use super::postgres::{Claim, PgLedger, Terminal};
use crate::settings::PgSettings;

fn test_url() -> String {
    hookline_testkit::postgres_url()
}

fn settings(schema: &str, lease: Duration) -> PgSettings {
    PgSettings {
        url: Secret::new(test_url()),
        schema: schema.to_owned(),
        lease,
        timeout: Duration::from_secs(5),
        retention: Duration::from_secs(3600),
        retention_batch: 2,
        retention_interval: Duration::from_secs(3600),
        max_connections: 2,
    }
}

/// A ledger in a fresh schema of its own, its tables made.
async fn ledger(name: &str, owner: &str, lease: Duration) -> (PgLedger, String) {
    let schema = format!(
        "t_{name}_{}_{:x}",
        std::process::id(),
        rand::random::<u32>()
    );
    let ledger = PgLedger::new(&settings(&schema, lease), owner).expect("settings");
    ledger.migrate().await.expect("migrations");
    (ledger, schema)
}

async fn drop_schema(schema: &str) {
    let pool = sqlx::PgPool::connect(&test_url()).await.expect("connect");
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&pool)
        .await
        .expect("drop schema");
}

async fn pool(schema: &str) -> sqlx::PgPool {
    let options = settings(schema, Duration::from_secs(1))
        .connect_options()
        .expect("options");
    sqlx::PgPool::connect_with(options).await.expect("connect")
}

/// The audit trail of one delivery, `from->to` in order.
async fn trail(schema: &str, endpoint: &str, event: &str) -> Vec<String> {
    sqlx::query(
        "SELECT coalesce(from_status, '-') || '->' || to_status FROM webhook_delivery_transitions \
         WHERE endpoint_id = $1 AND event_id = $2 ORDER BY id",
    )
    .bind(endpoint)
    .bind(event)
    .fetch_all(&pool(schema).await)
    .await
    .expect("transitions")
    .into_iter()
    .map(|row| row.get::<String, _>(0))
    .collect()
}

#[tokio::test]
async fn a_succeeded_delivery_is_final_and_audited() {
    let (a, schema) = ledger("final", "dispatcher-a", Duration::from_secs(30)).await;
    let b = PgLedger::new(&settings(&schema, Duration::from_secs(30)), "dispatcher-b")
        .expect("settings");
    let Claim::Claimed(token) = a.claim("ep", "evt-1").await.expect("claim") else {
        panic!("the first copy takes the delivery");
    };
    // A second copy while the first holds its lease: put off, not sent.
    match b.claim("ep", "evt-1").await.expect("claim") {
        Claim::Busy { remaining } => assert!(remaining > Duration::from_secs(20), "{remaining:?}"),
        other => panic!("expected Busy, got {other:?}"),
    }
    assert!(
        a.finish(
            "ep",
            "evt-1",
            Some(&token),
            Terminal::Succeeded,
            1,
            Some(200)
        )
        .await
        .expect("finish")
    );
    assert_eq!(
        b.claim("ep", "evt-1").await.expect("claim"),
        Claim::Succeeded
    );
    // The optimistic lock: nothing overwrites a succeeded delivery.
    assert!(
        !b.finish("ep", "evt-1", None, Terminal::Dlq, 5, Some(500))
            .await
            .expect("finish")
    );
    let row = sqlx::query(
        "SELECT status, attempts, last_status, lease_owner FROM webhook_deliveries \
         WHERE endpoint_id = 'ep' AND event_id = 'evt-1'",
    )
    .fetch_one(&pool(&schema).await)
    .await
    .expect("row");
    assert_eq!(row.get::<String, _>("status"), "Succeeded");
    assert_eq!(row.get::<i32, _>("attempts"), 1);
    assert_eq!(row.get::<Option<i32>, _>("last_status"), Some(200));
    assert_eq!(row.get::<Option<String>, _>("lease_owner"), None);
    assert_eq!(
        trail(&schema, "ep", "evt-1").await,
        ["Received->Processing", "Processing->Succeeded"]
    );
    // Another endpoint's delivery of the same event is its own.
    assert!(matches!(
        b.claim("ep-2", "evt-1").await.expect("claim"),
        Claim::Claimed(_)
    ));
    drop_schema(&schema).await;
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_and_a_parked_delivery_comes_back() {
    let lease = Duration::from_millis(300);
    let (a, schema) = ledger("lease", "dispatcher-a", lease).await;
    let b = PgLedger::new(&settings(&schema, Duration::from_secs(30)), "dispatcher-b")
        .expect("settings");
    let Claim::Claimed(stale) = a.claim("ep", "evt-2").await.expect("claim") else {
        panic!("claimed");
    };
    // The first copy stalls past its lease: the next copy takes the delivery over.
    let deadline = Instant::now() + Duration::from_secs(5);
    let token = loop {
        match b.claim("ep", "evt-2").await.expect("claim") {
            Claim::Claimed(token) => break token,
            Claim::Busy { remaining } if Instant::now() < deadline => {
                tokio::time::sleep(remaining.min(Duration::from_millis(100))).await;
            }
            other => panic!("not taken over in time: {other:?}"),
        }
    };
    // The stalled copy's failure does not take the live lease away.
    assert!(
        !a.finish("ep", "evt-2", Some(&stale), Terminal::Failed, 1, None)
            .await
            .expect("finish")
    );
    assert!(
        b.finish("ep", "evt-2", Some(&token), Terminal::Dlq, 3, Some(503))
            .await
            .expect("finish")
    );
    // A re-drive of a parked delivery is delivered again.
    assert!(matches!(
        a.claim("ep", "evt-2").await.expect("claim"),
        Claim::Claimed(_)
    ));
    assert_eq!(
        trail(&schema, "ep", "evt-2").await,
        [
            "Received->Processing",
            "Processing->Processing",
            "Processing->DLQ",
            "DLQ->Processing"
        ]
    );
    drop_schema(&schema).await;
}

#[tokio::test]
async fn a_released_lease_lets_the_next_copy_go_at_once() {
    let (a, schema) = ledger("release", "dispatcher-a", Duration::from_secs(60)).await;
    let Claim::Claimed(token) = a.claim("ep", "evt-3").await.expect("claim") else {
        panic!("claimed");
    };
    a.release("ep", "evt-3", &token).await.expect("release");
    assert!(matches!(
        a.claim("ep", "evt-3").await.expect("claim"),
        Claim::Claimed(_)
    ));
    drop_schema(&schema).await;
}

#[tokio::test]
async fn retention_removes_old_rows_in_batches_and_keeps_new_ones() {
    let (a, schema) = ledger("retention", "dispatcher-a", Duration::from_secs(60)).await;
    for i in 0..5 {
        a.finish(
            "ep",
            &format!("old-{i}"),
            None,
            Terminal::Succeeded,
            1,
            Some(200),
        )
        .await
        .expect("finish");
    }
    a.finish("ep", "new", None, Terminal::Succeeded, 1, Some(200))
        .await
        .expect("finish");
    let db = pool(&schema).await;
    sqlx::query(
        "UPDATE webhook_deliveries SET updated_at = now() - interval '2 hours' \
         WHERE event_id LIKE 'old-%'",
    )
    .execute(&db)
    .await
    .expect("age rows");
    sqlx::query(
        "UPDATE webhook_delivery_transitions SET at = now() - interval '2 hours' \
         WHERE event_id LIKE 'old-%'",
    )
    .execute(&db)
    .await
    .expect("age transitions");
    // Batches of 2: three statements per table, 5 + 5 rows.
    assert_eq!(a.sweep().await.expect("sweep"), 10);
    let left: Vec<String> = sqlx::query_scalar("SELECT event_id FROM webhook_deliveries")
        .fetch_all(&db)
        .await
        .expect("rows");
    assert_eq!(left, ["new"]);
    assert_eq!(trail(&schema, "ep", "new").await, ["Received->Succeeded"]);
    drop_schema(&schema).await;
}

#[tokio::test]
async fn an_unreachable_postgres_fails_within_the_timeout() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let mut settings = settings("public", Duration::from_secs(1));
    settings.url = Secret::new(format!("postgres://hookline:pw@127.0.0.1:{port}/hookline"));
    settings.timeout = Duration::from_millis(300);
    let ledger = PgLedger::new(&settings, "dispatcher-a").expect("settings");
    let started = Instant::now();
    let error = ledger
        .claim("ep", "evt")
        .await
        .expect_err("nothing listens");
    assert_eq!(error.store(), "postgres");
    assert_eq!(error.op(), "claim");
    assert!(started.elapsed() < Duration::from_secs(2), "{error}");
}

#[tokio::test]
async fn the_migrations_share_their_table_with_other_parts_of_hookline() {
    // The outbox's and the receiver's tables may live in the same schema, so their
    // versions sit in the same `_sqlx_migrations` table: the ledger still starts.
    let (first, schema) = ledger("shared", "dispatcher-a", Duration::from_secs(30)).await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (29991231000001, 'another part of hookline', true, '\\x00'::bytea, 0)",
    )
    .execute(&pool(&schema).await)
    .await
    .expect("another migration");
    first
        .migrate()
        .await
        .expect("the ledger migrates beside it");
    let again = PgLedger::new(&settings(&schema, Duration::from_secs(30)), "dispatcher-b")
        .expect("settings");
    again.migrate().await.expect("and so does the next replica");
    drop_schema(&schema).await;
}
