//! The Redis store's key layout and state machine, and the layer's 503 when Redis is gone.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::post;
use hookline_core::secret::Secret;
use hookline_core::signing::SigningSecret;
use hookline_receiver::{
    Claim, DedupStore, ReceiverConfig, RedisStore, RedisStoreSettings, WebhookLayer,
};
use http::{Request, StatusCode};
use tower::ServiceExt;

use hookline_testkit::RedisServer;

pub(crate) const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DAY: Duration = Duration::from_secs(86_400);

async fn store(redis: &RedisServer) -> RedisStore {
    let mut settings = RedisStoreSettings::new(Secret::new(redis.url()));
    settings.timeout = Duration::from_millis(300);
    RedisStore::connect(settings).await.expect("connects")
}

#[tokio::test]
async fn ids_go_processing_then_succeeded_under_one_key_with_the_ttl() {
    let redis = RedisServer::start().await;
    let store = store(&redis).await;
    let key = "hookline:receiver:msg_1";
    assert_eq!(store.key("msg_1"), key);

    assert_eq!(
        store.claim("msg_1", DAY).await.expect("claim"),
        Claim::Claimed
    );
    let value: Option<String> = redis.query(redis::cmd("GET").arg(key)).await;
    assert_eq!(value.as_deref(), Some("processing"));
    let ttl: i64 = redis.query(redis::cmd("TTL").arg(key)).await;
    assert!((86_390..=86_400).contains(&ttl), "24 h: {ttl}");
    assert_eq!(
        store.claim("msg_1", DAY).await.expect("claim"),
        Claim::Processing
    );

    store.succeed("msg_1", DAY).await.expect("succeed");
    let value: Option<String> = redis.query(redis::cmd("GET").arg(key)).await;
    assert_eq!(value.as_deref(), Some("succeeded"));
    let ttl: i64 = redis.query(redis::cmd("TTL").arg(key)).await;
    assert!((86_390..=86_400).contains(&ttl), "24 h: {ttl}");
    assert_eq!(
        store.claim("msg_1", DAY).await.expect("claim"),
        Claim::Succeeded
    );

    assert_eq!(
        store.claim("msg_2", DAY).await.expect("claim"),
        Claim::Claimed
    );
    store.release("msg_2").await.expect("release");
    let exists: u64 = redis
        .query(redis::cmd("EXISTS").arg("hookline:receiver:msg_2"))
        .await;
    assert_eq!(exists, 0, "a failed id is forgotten");
    assert_eq!(
        store.claim("msg_2", DAY).await.expect("claim"),
        Claim::Claimed
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
    let store = store(&redis).await;
    let settings = ReceiverConfig::with_secrets([Secret::new(SECRET)])
        .into_settings()
        .expect("valid");
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    let app = Router::new()
        .route(
            "/hook",
            post(move || async move {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                StatusCode::OK
            }),
        )
        .layer(WebhookLayer::new(settings, store));
    let request = |id: &str| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let sig = SigningSecret::parse(SECRET)
            .expect("secret")
            .sign(id, now, b"{}");
        Request::post("/hook")
            .header("webhook-id", id)
            .header("webhook-timestamp", now.to_string())
            .header("webhook-signature", sig)
            .body(Body::from("{}"))
            .expect("request")
    };
    let up = app
        .clone()
        .oneshot(request("msg_up"))
        .await
        .expect("infallible");
    assert_eq!(up.status(), StatusCode::OK);

    redis.stop();
    let started = std::time::Instant::now();
    let down = app
        .clone()
        .oneshot(request("msg_down"))
        .await
        .expect("infallible");
    assert_eq!(down.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded by the timeout"
    );
}
