//! The PostgreSQL store against the local stack's PostgreSQL (`hookline_testkit::
//! postgres_url()`), each test in a schema of its own, dropped at the end: the state
//! machine and its audit trail, the optimistic lock under concurrent copies, the lease, the
//! owner token, retention, and the layer's answers (200, 409, 503) over it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hookline_core::secret::Secret;
use hookline_receiver::{
    Claim, DedupStore, OnStoreError, PgStore, PgStoreSettings, ReceiverConfig, Settle,
};
use hookline_testkit::{Proxy, postgres_url, wait_until};
use http::StatusCode;
use sqlx::Row;

use crate::support::{a_crashed_claim_blocks_only_for_the_lease, app};

const DAY: Duration = Duration::from_secs(86_400);
const MINUTE: Duration = Duration::from_secs(60);

/// A schema of the test's own, and a plain pool on the database to look at it.
struct Db {
    schema: String,
    pool: sqlx::PgPool,
}

impl Db {
    async fn new(name: &str) -> Db {
        let schema = format!(
            "t_rcv_{name}_{}_{:x}",
            std::process::id(),
            rand::random::<u32>()
        );
        let pool = sqlx::PgPool::connect(&postgres_url())
            .await
            .expect("the local stack's PostgreSQL (deploy/local/stack up)");
        Db { schema, pool }
    }

    fn settings(&self, receiver: &str) -> PgStoreSettings {
        let mut settings = PgStoreSettings::new(Secret::new(postgres_url()));
        settings.schema = self.schema.clone();
        settings.receiver = receiver.to_owned();
        settings.timeout = Duration::from_secs(5);
        settings.purge_interval = None;
        settings
    }

    async fn store(&self, receiver: &str) -> PgStore {
        PgStore::connect(self.settings(receiver))
            .await
            .expect("connects and migrates")
    }

    /// (status, attempts, lease_owner) of one row.
    async fn row(&self, receiver: &str, id: &str) -> Option<(String, i32, Option<String>)> {
        sqlx::query_as(&format!(
            "SELECT status, attempts, lease_owner FROM {}.hookline_received \
             WHERE receiver = $1 AND webhook_id = $2",
            self.schema
        ))
        .bind(receiver)
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .expect("row")
    }

    async fn count(&self, table: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {}.{table}", self.schema))
            .fetch_one(&self.pool)
            .await
            .expect("count")
    }

    /// The audit trail of one id, `from->to` in order.
    async fn trail(&self, receiver: &str, id: &str) -> Vec<String> {
        sqlx::query(&format!(
            "SELECT coalesce(from_status, '-') || '->' || to_status \
             FROM {}.hookline_received_transitions \
             WHERE receiver = $1 AND webhook_id = $2 ORDER BY id",
            self.schema
        ))
        .bind(receiver)
        .bind(id)
        .fetch_all(&self.pool)
        .await
        .expect("transitions")
        .into_iter()
        .map(|row| row.get::<String, _>(0))
        .collect()
    }

    async fn drop(self) {
        sqlx::query(&format!("DROP SCHEMA {} CASCADE", self.schema))
            .execute(&self.pool)
            .await
            .expect("drop schema");
    }
}

async fn claimed(store: &PgStore, id: &str, lease: Duration) -> hookline_receiver::ClaimToken {
    match store.claim(id, lease, DAY).await.expect("claim") {
        Claim::Claimed(token) => token,
        other => panic!("{id} not claimed: {other:?}"),
    }
}

#[tokio::test]
async fn pg_ids_go_processing_failed_processing_succeeded_and_each_step_is_audited() {
    let db = Db::new("states").await;
    let store = db.store("default").await;
    let url: url::Url = postgres_url().parse().expect("url");
    let password = url.password().expect("the stack's URL has a password");
    assert!(!format!("{store:?}").contains(password), "{store:?}");
    let first = claimed(&store, "msg_1", MINUTE).await;
    assert_eq!(
        db.row("default", "msg_1").await,
        Some(("Processing".to_owned(), 1, Some(first.as_str().to_owned())))
    );
    assert_eq!(
        store.claim("msg_1", MINUTE, DAY).await.expect("claim"),
        Claim::Processing,
        "a copy while the lease is live"
    );
    assert_eq!(
        store.release("msg_1", &first).await.expect("release"),
        Settle::Recorded
    );
    assert_eq!(
        db.row("default", "msg_1").await,
        Some(("Failed".to_owned(), 1, None))
    );
    let second = claimed(&store, "msg_1", MINUTE).await;
    assert_eq!(
        store.succeed("msg_1", &second, DAY).await.expect("succeed"),
        Settle::Recorded
    );
    assert_eq!(
        db.row("default", "msg_1").await,
        Some(("Succeeded".to_owned(), 2, None))
    );
    assert_eq!(
        store.claim("msg_1", MINUTE, DAY).await.expect("claim"),
        Claim::Succeeded
    );
    assert_eq!(
        db.trail("default", "msg_1").await,
        [
            "-->Processing",
            "Processing->Failed",
            "Failed->Processing",
            "Processing->Succeeded"
        ]
    );
    // A second connect (a replica starting) finds the tables made.
    let again = db.store("default").await;
    assert_eq!(
        again.claim("msg_1", MINUTE, DAY).await.expect("claim"),
        Claim::Succeeded
    );
    db.drop().await;
}

#[tokio::test]
async fn pg_of_concurrent_copies_one_claims_and_the_layer_answers_the_other_409() {
    let db = Db::new("race").await;
    let (a, b) = (db.store("default").await, db.store("default").await);
    let claims = futures_join((0..8).map(|n| {
        let store = if n % 2 == 0 { a.clone() } else { b.clone() };
        async move { store.claim("msg_race", MINUTE, DAY).await.expect("claim") }
    }))
    .await;
    let won = claims
        .iter()
        .filter(|c| matches!(c, Claim::Claimed(_)))
        .count();
    assert_eq!(won, 1, "{claims:?}");
    assert!(
        claims
            .iter()
            .all(|c| matches!(c, Claim::Claimed(_) | Claim::Processing)),
        "{claims:?}"
    );

    let app = app(a.clone(), ReceiverConfig::default());
    app.handler.hold.store(true, Ordering::SeqCst);
    let first = tokio::spawn({
        let router = app.router.clone();
        async move {
            use tower::ServiceExt;
            router
                .oneshot(crate::support::signed("msg_held"))
                .await
                .expect("infallible")
                .status()
        }
    });
    app.handler.started.notified().await;
    assert_eq!(app.send("msg_held").await, StatusCode::CONFLICT);
    app.handler.gate.notify_one();
    assert_eq!(first.await.expect("first"), StatusCode::OK);
    assert_eq!(app.runs(), 1);
    assert_eq!(app.send("msg_held").await, StatusCode::OK, "a later copy");
    assert_eq!(app.runs(), 1, "answered without the handler");
    db.drop().await;
}

/// Runs the futures at once, on tasks of their own.
async fn futures_join<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.expect("task"));
    }
    out
}

#[tokio::test]
async fn pg_a_duplicate_of_a_succeeded_id_gets_200_and_a_failed_one_is_processed_again() {
    let db = Db::new("layer").await;
    let app = app(db.store("default").await, ReceiverConfig::default());
    assert_eq!(app.send("msg_ok").await, StatusCode::OK);
    assert_eq!(app.send("msg_ok").await, StatusCode::OK);
    assert_eq!(app.runs(), 1, "the duplicate without the handler");

    app.handler.fail_next.store(true, Ordering::SeqCst);
    assert_eq!(
        app.send("msg_fail").await,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(app.send("msg_fail").await, StatusCode::OK, "the retry");
    assert_eq!(app.runs(), 3);
    assert_eq!(
        db.row("default", "msg_fail").await,
        Some(("Succeeded".to_owned(), 2, None))
    );
    db.drop().await;
}

#[tokio::test]
async fn pg_a_receiver_that_crashed_mid_handler_blocks_the_id_only_for_the_lease() {
    let db = Db::new("lease").await;
    let store = db.store("default").await;
    // The crashed receiver's claim: taken, never settled.
    claimed(&store, "msg_crash", Duration::from_secs(1)).await;
    a_crashed_claim_blocks_only_for_the_lease(store, "msg_crash").await;
    assert_eq!(
        db.row("default", "msg_crash").await,
        Some(("Succeeded".to_owned(), 2, None))
    );
    db.drop().await;
}

#[tokio::test]
async fn pg_a_late_failure_of_an_expired_claim_does_not_release_the_newer_one() {
    let db = Db::new("owner").await;
    let store = db.store("default").await;
    let lease = Duration::from_millis(200);
    let a = claimed(&store, "msg_late", lease).await;
    let b = wait_until(Duration::from_secs(10), "A's lease to run out", || async {
        match store.claim("msg_late", MINUTE, DAY).await.expect("claim") {
            Claim::Claimed(b) => Some(b),
            _ => None,
        }
    })
    .await;
    assert_eq!(
        store.release("msg_late", &a).await.expect("release"),
        Settle::Superseded,
        "A's late failure"
    );
    assert_eq!(
        store.succeed("msg_late", &a, DAY).await.expect("succeed"),
        Settle::Superseded,
        "or A's late success"
    );
    assert_eq!(
        db.row("default", "msg_late").await,
        Some(("Processing".to_owned(), 2, Some(b.as_str().to_owned()))),
        "B still holds it"
    );
    assert_eq!(
        store.claim("msg_late", lease, DAY).await.expect("claim"),
        Claim::Processing
    );
    db.drop().await;
}

#[tokio::test]
async fn pg_receivers_sharing_the_table_keep_their_ids_apart() {
    let db = Db::new("shared").await;
    let (orders, billing) = (db.store("orders").await, db.store("billing").await);
    let token = claimed(&orders, "msg_same", MINUTE).await;
    orders
        .succeed("msg_same", &token, DAY)
        .await
        .expect("succeed");
    claimed(&billing, "msg_same", MINUTE).await;
    assert_eq!(db.count("hookline_received").await, 2);
    db.drop().await;
}

#[tokio::test]
async fn pg_expired_ids_are_forgotten_and_purged_in_batches() {
    let db = Db::new("purge").await;
    let mut settings = db.settings("default");
    settings.purge_batch = 2;
    let store = PgStore::connect(settings).await.expect("store");
    let ttl = Duration::from_secs(1);
    for n in 0..5 {
        let id = format!("msg_{n}");
        let Claim::Claimed(token) = store.claim(&id, MINUTE, ttl).await.expect("claim") else {
            panic!("claimed");
        };
        store.succeed(&id, &token, ttl).await.expect("succeed");
    }
    claimed(&store, "msg_kept", MINUTE).await;
    assert_eq!(
        store.purge_expired().await.expect("purge"),
        0,
        "none expired yet"
    );
    assert_eq!(
        store.claim("msg_0", MINUTE, ttl).await.expect("claim"),
        Claim::Succeeded
    );
    // Past the TTL an id is forgotten: a copy is processed again, as with Redis.
    let again = wait_until(Duration::from_secs(10), "msg_0's TTL to end", || async {
        match store.claim("msg_0", MINUTE, DAY).await.expect("claim") {
            Claim::Claimed(token) => Some(token),
            _ => None,
        }
    })
    .await;
    store.release("msg_0", &again).await.expect("release");
    let expired = format!(
        "SELECT count(*) FROM {}.hookline_received WHERE expires_at < now()",
        db.schema
    );
    wait_until(Duration::from_secs(10), "msg_1..4's TTL to end", || async {
        let n: i64 = sqlx::query_scalar(&expired)
            .fetch_one(&db.pool)
            .await
            .expect("count");
        (n == 4).then_some(())
    })
    .await;
    // One call, batches of 2 until one comes back short: 2 + 2 + 0.
    assert_eq!(store.purge_expired().await.expect("purge"), 4);
    assert_eq!(db.count("hookline_received").await, 2, "msg_0 and msg_kept");

    // The background task does the same by itself.
    let mut settings = db.settings("default");
    settings.purge_interval = Some(Duration::from_millis(100));
    let background = PgStore::connect(settings).await.expect("store");
    background
        .claim("msg_short", MINUTE, ttl)
        .await
        .expect("claim");
    wait_until(
        Duration::from_secs(10),
        "the purge to remove msg_short",
        || async { db.row("default", "msg_short").await.is_none().then_some(()) },
    )
    .await;
    assert!(db.row("default", "msg_kept").await.is_some());
    drop(background);
    db.drop().await;
}

#[tokio::test]
async fn pg_unreachable_gets_503_or_is_processed_when_configured() {
    let db = Db::new("down").await;
    let target: url::Url = postgres_url().parse().expect("url");
    let port = target.port().unwrap_or(5432);
    let proxy = Proxy::start(([127, 0, 0, 1], port).into()).await;
    let mut via = target.clone();
    via.set_port(Some(proxy.addr().port())).expect("port");
    let mut settings = db.settings("default");
    settings.url = Secret::new(via.to_string());
    settings.timeout = Duration::from_millis(500);
    let store = PgStore::connect(settings).await.expect("store");
    let strict = app(store.clone(), ReceiverConfig::default());
    let open_config = ReceiverConfig {
        on_store_error: OnStoreError::Process,
        ..ReceiverConfig::default()
    };
    let open = app(store, open_config);
    assert_eq!(strict.send("msg_up").await, StatusCode::OK);

    proxy.set_down();
    let started = Instant::now();
    assert_eq!(
        strict.send("msg_down").await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert!(started.elapsed() < Duration::from_secs(5), "bounded");
    assert_eq!(strict.runs(), 1, "not run without the store");
    assert_eq!(open.send("msg_down").await, StatusCode::OK);
    assert_eq!(open.runs(), 1, "run without de-duplication");

    proxy.set_up();
    wait_until(Duration::from_secs(10), "the store to be back", || async {
        (strict.send("msg_back").await == StatusCode::OK).then_some(())
    })
    .await;
    db.drop().await;
}

#[tokio::test]
async fn pg_the_url_password_never_shows() {
    let mut settings = PgStoreSettings::new(Secret::new(
        "postgres://hookline:hunter2-pass@127.0.0.1:1/x",
    ));
    settings.timeout = Duration::from_millis(300);
    let shown = format!("{settings:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    let error = PgStore::connect(settings)
        .await
        .expect_err("nothing listens on port 1");
    assert!(
        !format!("{error} {error:?}").contains("hunter2"),
        "{error:?}"
    );
}
