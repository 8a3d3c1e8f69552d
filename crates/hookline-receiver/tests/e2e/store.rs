//! The Redis store's key layout, lease and owner tokens, and the layer's 503 when Redis is
//! gone, against a real `redis-server` each test starts.

use std::time::{Duration, Instant};

use hookline_core::secret::Secret;
use hookline_receiver::{
    Claim, DedupStore, ReceiverConfig, RedisStore, RedisStoreSettings, Settle,
};
use hookline_testkit::{RedisServer, wait_until};
use http::StatusCode;

use crate::support::{a_crashed_claim_blocks_only_for_the_lease, app};

const DAY: Duration = Duration::from_secs(86_400);
const MINUTE: Duration = Duration::from_secs(60);

async fn store(redis: &RedisServer) -> RedisStore {
    let mut settings = RedisStoreSettings::new(Secret::new(redis.url()));
    settings.timeout = Duration::from_millis(300);
    RedisStore::connect(settings).await.expect("connects")
}

async fn get(redis: &RedisServer, key: &str) -> Option<String> {
    redis.query(redis::cmd("GET").arg(key)).await
}

#[tokio::test]
async fn ids_go_processing_under_the_lease_then_succeeded_under_the_ttl() {
    let redis = RedisServer::start().await;
    let store = store(&redis).await;
    let key = "hookline:receiver:msg_1";
    assert_eq!(store.key("msg_1"), key);

    let Claim::Claimed(token) = store.claim("msg_1", MINUTE, DAY).await.expect("claim") else {
        panic!("a new id is claimed");
    };
    assert_eq!(
        get(&redis, key).await,
        Some(format!("processing:{}", token.as_str()))
    );
    let pttl: i64 = redis.query(redis::cmd("PTTL").arg(key)).await;
    assert!((50_000..=60_000).contains(&pttl), "the lease, 60 s: {pttl}");
    assert_eq!(
        store.claim("msg_1", MINUTE, DAY).await.expect("claim"),
        Claim::Processing
    );

    assert_eq!(
        store.succeed("msg_1", &token, DAY).await.expect("succeed"),
        Settle::Recorded
    );
    assert_eq!(get(&redis, key).await.as_deref(), Some("succeeded"));
    let ttl: i64 = redis.query(redis::cmd("TTL").arg(key)).await;
    assert!((86_390..=86_400).contains(&ttl), "24 h: {ttl}");
    assert_eq!(
        store.claim("msg_1", MINUTE, DAY).await.expect("claim"),
        Claim::Succeeded
    );

    let Claim::Claimed(token) = store.claim("msg_2", MINUTE, DAY).await.expect("claim") else {
        panic!("a new id is claimed");
    };
    assert_eq!(
        store.release("msg_2", &token).await.expect("release"),
        Settle::Recorded
    );
    assert_eq!(
        get(&redis, "hookline:receiver:msg_2").await,
        None,
        "forgotten"
    );
    assert!(matches!(
        store.claim("msg_2", MINUTE, DAY).await.expect("claim"),
        Claim::Claimed(_)
    ));
}

#[tokio::test]
async fn a_late_failure_of_an_expired_claim_does_not_release_the_newer_one() {
    let redis = RedisServer::start().await;
    let store = store(&redis).await;
    let lease = Duration::from_millis(200);
    let Claim::Claimed(a) = store.claim("msg_3", lease, DAY).await.expect("claim") else {
        panic!("copy A claims");
    };
    // A's handler hangs past its lease; copy B comes and claims.
    let b = wait_until(Duration::from_secs(10), "A's lease to run out", || async {
        match store.claim("msg_3", lease * 50, DAY).await.expect("claim") {
            Claim::Claimed(b) => Some(b),
            _ => None,
        }
    })
    .await;
    assert_eq!(
        store.release("msg_3", &a).await.expect("release"),
        Settle::Superseded,
        "A's late failure"
    );
    assert_eq!(
        store.succeed("msg_3", &a, DAY).await.expect("succeed"),
        Settle::Superseded,
        "or A's late success"
    );
    assert_eq!(
        get(&redis, "hookline:receiver:msg_3").await,
        Some(format!("processing:{}", b.as_str())),
        "B still holds it"
    );
    assert_eq!(
        store.claim("msg_3", lease, DAY).await.expect("claim"),
        Claim::Processing,
        "a third copy waits for B"
    );
    assert_eq!(
        store.succeed("msg_3", &b, DAY).await.expect("succeed"),
        Settle::Recorded
    );
}

#[tokio::test]
async fn a_receiver_that_crashed_mid_handler_blocks_the_id_only_for_the_lease() {
    let redis = RedisServer::start().await;
    let store = store(&redis).await;
    // The crashed receiver's claim: taken, never settled.
    let crashed = store.claim("msg_4", Duration::from_secs(1), DAY).await;
    assert!(matches!(crashed, Ok(Claim::Claimed(_))));
    a_crashed_claim_blocks_only_for_the_lease(store, "msg_4").await;
    assert_eq!(
        get(&redis, "hookline:receiver:msg_4").await.as_deref(),
        Some("succeeded")
    );
}

#[tokio::test]
async fn the_url_password_never_shows() {
    let settings = RedisStoreSettings::new(Secret::new("redis://:hunter2-pass@127.0.0.1:1"));
    let shown = format!("{settings:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    let error = RedisStore::connect(settings)
        .await
        .expect_err("nothing listens on port 1");
    assert!(!error.to_string().contains("hunter2"), "{error}");
}

#[tokio::test]
async fn without_redis_the_layer_answers_503_and_the_handler_does_not_run() {
    let mut redis = RedisServer::start().await;
    let app = app(store(&redis).await, ReceiverConfig::default());
    assert_eq!(app.send("msg_up").await, StatusCode::OK);

    redis.stop();
    let started = Instant::now();
    assert_eq!(app.send("msg_down").await, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded by the timeout"
    );
    assert_eq!(app.runs(), 1);
}
