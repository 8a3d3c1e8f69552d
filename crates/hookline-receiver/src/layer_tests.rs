//! The layer's decisions with an in-memory store and a fixed clock: 401 before the handler,
//! the handler once per id, 409 while it runs, the id released when it fails.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::post;
use hookline_core::secret::Secret;
use hookline_core::signing::SigningSecret;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use tokio::sync::Notify;
use tower::ServiceExt;

use super::*;
use crate::config::ReceiverConfig;
use crate::dedup::memory::{MemoryStore, State};
use crate::verify::Verified;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const NOW: i64 = 1_700_000_000;

/// What the test handler does, and how often it ran.
#[derive(Default)]
struct Handler {
    runs: AtomicUsize,
    fail_next: AtomicBool,
    /// When set, the handler waits for it before answering.
    gate: Option<Arc<Notify>>,
    started: Notify,
}

struct Fixture {
    store: Arc<MemoryStore>,
    handler: Arc<Handler>,
    router: Router,
}

fn fixture(handler: Handler, on_store_error: OnStoreError) -> Fixture {
    let mut config = ReceiverConfig::with_secrets([Secret::new(SECRET)]);
    config.max_body_bytes = 64;
    config.on_store_error = on_store_error;
    let store = Arc::new(MemoryStore::default());
    let layer =
        WebhookLayer::new(config.into_settings().expect("valid"), store.clone()).with_clock(|| NOW);
    let handler = Arc::new(handler);
    let h = handler.clone();
    let router = Router::new()
        .route(
            "/hook",
            post(move |verified: Verified, body: axum::body::Bytes| {
                let h = h.clone();
                async move {
                    h.runs.fetch_add(1, Ordering::SeqCst);
                    h.started.notify_one();
                    if let Some(gate) = &h.gate {
                        gate.notified().await;
                    }
                    if h.fail_next.swap(false, Ordering::SeqCst) {
                        return (StatusCode::INTERNAL_SERVER_ERROR, String::new());
                    }
                    (StatusCode::OK, format!("{} {}", verified.id, body.len()))
                }
            }),
        )
        .layer(layer);
    Fixture {
        store,
        handler,
        router,
    }
}

fn signed(id: &str, ts: i64, body: &str) -> Request<Body> {
    let sig = SigningSecret::parse(SECRET)
        .expect("secret")
        .sign(id, ts, body.as_bytes());
    Request::post("/hook")
        .header("webhook-id", id)
        .header("webhook-timestamp", ts.to_string())
        .header("webhook-signature", sig)
        .body(Body::from(body.to_owned()))
        .expect("request")
}

async fn send(router: &Router, request: Request<Body>) -> (StatusCode, String) {
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn a_duplicate_of_a_processed_webhook_gets_200_without_the_handler() {
    let f = fixture(Handler::default(), OnStoreError::Reject);
    assert_eq!(
        send(&f.router, signed("evt_1", NOW, "{}")).await,
        (StatusCode::OK, "evt_1 2".to_owned())
    );
    assert_eq!(f.store.state("evt_1"), Some(State::Succeeded));
    let (status, _) = send(&f.router, signed("evt_1", NOW + 1, "{}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(f.handler.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_failed_handler_releases_the_id_so_the_retry_is_processed() {
    let f = fixture(
        Handler {
            fail_next: AtomicBool::new(true),
            ..Handler::default()
        },
        OnStoreError::Reject,
    );
    let (status, _) = send(&f.router, signed("evt_2", NOW, "{}")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(f.store.state("evt_2"), None);
    let (status, _) = send(&f.router, signed("evt_2", NOW, "{}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(f.handler.runs.load(Ordering::SeqCst), 2);
    assert_eq!(f.store.state("evt_2"), Some(State::Succeeded));
}

#[tokio::test]
async fn a_copy_arriving_while_the_first_runs_gets_409() {
    let gate = Arc::new(Notify::new());
    let f = fixture(
        Handler {
            gate: Some(gate.clone()),
            ..Handler::default()
        },
        OnStoreError::Reject,
    );
    let first = tokio::spawn({
        let router = f.router.clone();
        async move { send(&router, signed("evt_3", NOW, "{}")).await }
    });
    f.handler.started.notified().await;
    let (status, reason) = send(&f.router, signed("evt_3", NOW, "{}")).await;
    assert_eq!(
        (status, reason.as_str()),
        (
            StatusCode::CONFLICT,
            "duplicate: still processing, retry later"
        )
    );
    gate.notify_one();
    assert_eq!(first.await.expect("first").0, StatusCode::OK);
    assert_eq!(f.handler.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_request_dropped_mid_handler_releases_its_id() {
    let gate = Arc::new(Notify::new());
    let f = fixture(
        Handler {
            gate: Some(gate),
            ..Handler::default()
        },
        OnStoreError::Reject,
    );
    let first = tokio::spawn({
        let router = f.router.clone();
        async move { send(&router, signed("evt_4", NOW, "{}")).await }
    });
    f.handler.started.notified().await;
    assert_eq!(f.store.state("evt_4"), Some(State::Processing));
    first.abort();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while f.store.state("evt_4").is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the id was never released"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn an_unavailable_store_gets_503_or_is_processed_when_configured() {
    let f = fixture(Handler::default(), OnStoreError::Reject);
    f.store.down.store(true, Ordering::SeqCst);
    let (status, _) = send(&f.router, signed("evt_5", NOW, "{}")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(f.handler.runs.load(Ordering::SeqCst), 0);

    let open = fixture(Handler::default(), OnStoreError::Process);
    open.store.down.store(true, Ordering::SeqCst);
    let (status, _) = send(&open.router, signed("evt_5", NOW, "{}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(open.handler.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn bad_signatures_stale_timestamps_and_large_bodies_never_reach_the_handler() {
    let f = fixture(Handler::default(), OnStoreError::Reject);
    let mut tampered = signed("evt_6", NOW, "{}");
    *tampered.body_mut() = Body::from("{\"x\":1}");
    assert_eq!(
        send(&f.router, tampered).await,
        (StatusCode::UNAUTHORIZED, "no valid signature".to_owned())
    );
    let stale = signed("evt_6", NOW - 301, "{}");
    assert_eq!(
        send(&f.router, stale).await,
        (
            StatusCode::UNAUTHORIZED,
            "timestamp outside the tolerance".to_owned()
        )
    );
    let unsigned = Request::post("/hook")
        .body(Body::from("{}"))
        .expect("request");
    assert_eq!(
        send(&f.router, unsigned).await,
        (
            StatusCode::UNAUTHORIZED,
            "missing webhook-id header".to_owned()
        )
    );
    let large = signed("evt_6", NOW, &"x".repeat(65));
    assert_eq!(
        send(&f.router, large).await.0,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert_eq!(f.handler.runs.load(Ordering::SeqCst), 0);
    assert_eq!(f.store.state("evt_6"), None);
}
