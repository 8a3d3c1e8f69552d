//! What the store tests share: a receiver app behind the layer with a handler that counts
//! its runs, can be held mid-way and made to fail once, and requests signed now.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::routing::post;
use hookline_core::secret::Secret;
use hookline_core::signing::SigningSecret;
use hookline_receiver::{DedupStore, ReceiverConfig, WebhookLayer};
use http::{Request, StatusCode};
use tokio::sync::Notify;
use tower::ServiceExt;

pub(crate) const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The handler's controls and counters.
#[derive(Default)]
pub(crate) struct Handler {
    /// Handler runs so far.
    pub runs: AtomicUsize,
    /// When set, the next run answers 500.
    pub fail_next: AtomicBool,
    /// When set, runs wait for a `gate.notify_one()` before answering.
    pub hold: AtomicBool,
    pub gate: Notify,
    /// Notified when a run starts.
    pub started: Notify,
}

pub(crate) struct App {
    pub router: Router,
    pub handler: Arc<Handler>,
}

/// The receiver with `config` (the test secret added) over `store`.
/// A receiver whose store holds `id` under a crashed receiver's claim (taken with a 1 s
/// lease, never settled): a copy gets 409 at first, and a retry is processed once the lease
/// ran out (well before the 24 h TTL); the handler runs once.
pub(crate) async fn a_crashed_claim_blocks_only_for_the_lease<D: DedupStore>(store: D, id: &str) {
    let config = ReceiverConfig {
        processing_lease_s: 1,
        ..ReceiverConfig::default()
    };
    let app = app(store, config);
    assert_eq!(app.send(id).await, StatusCode::CONFLICT);
    let started = std::time::Instant::now();
    hookline_testkit::wait_until(
        std::time::Duration::from_secs(10),
        "the retry to be processed",
        || async { (app.send(id).await == StatusCode::OK).then_some(()) },
    )
    .await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "about the lease"
    );
    assert_eq!(app.runs(), 1);
}

pub(crate) fn app<D: DedupStore>(store: D, mut config: ReceiverConfig) -> App {
    config.secrets = vec![Secret::new(SECRET)];
    let settings = config.into_settings().expect("valid config");
    let handler = Arc::new(Handler::default());
    let h = handler.clone();
    let router = Router::new()
        .route(
            "/hook",
            post(move || {
                let h = h.clone();
                async move {
                    h.runs.fetch_add(1, Ordering::SeqCst);
                    h.started.notify_one();
                    if h.hold.load(Ordering::SeqCst) {
                        h.gate.notified().await;
                    }
                    if h.fail_next.swap(false, Ordering::SeqCst) {
                        StatusCode::INTERNAL_SERVER_ERROR
                    } else {
                        StatusCode::OK
                    }
                }
            }),
        )
        .layer(WebhookLayer::new(settings, store));
    App { router, handler }
}

impl App {
    /// Sends a webhook with this id, signed now; the answer's status.
    pub async fn send(&self, id: &str) -> StatusCode {
        self.router
            .clone()
            .oneshot(signed(id))
            .await
            .expect("infallible")
            .status()
    }

    pub fn runs(&self) -> usize {
        self.handler.runs.load(Ordering::SeqCst)
    }
}

/// A request for `id`, signed with [`SECRET`] at the current time.
pub(crate) fn signed(id: &str) -> Request<Body> {
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
}
