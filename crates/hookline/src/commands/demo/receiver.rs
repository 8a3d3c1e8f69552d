//! The demo's receiver: a real HTTP server on loopback whose endpoints behave like the ones
//! a platform meets in production: reliable, flaky, rate-limited, broken, and gone.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tokio_util::sync::CancellationToken;

/// How a demo endpoint answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Always 200.
    Reliable,
    /// 503 on the first attempt of every third event, and on the second of every ninth.
    Flaky,
    /// 429 with `Retry-After: 1` on the first attempt of every other event.
    RateLimited,
    /// Always 500: everything ends in the DLQ after the last attempt.
    Broken,
    /// Always 410 Gone: not retried, straight to the DLQ.
    Gone,
}

impl Behaviour {
    /// The reply to attempt `attempt` (from 1) of the `nth` event this endpoint has seen.
    fn reply(self, nth: usize, attempt: u32) -> (StatusCode, Option<&'static str>) {
        match self {
            Behaviour::Reliable => (StatusCode::OK, None),
            Behaviour::Flaky
                if (attempt == 1 && nth.is_multiple_of(3))
                    || (attempt == 2 && nth.is_multiple_of(9)) =>
            {
                (StatusCode::SERVICE_UNAVAILABLE, None)
            }
            Behaviour::Flaky => (StatusCode::OK, None),
            Behaviour::RateLimited if attempt == 1 && nth.is_multiple_of(2) => {
                (StatusCode::TOO_MANY_REQUESTS, Some("1"))
            }
            Behaviour::RateLimited => (StatusCode::NO_CONTENT, None),
            Behaviour::Broken => (StatusCode::INTERNAL_SERVER_ERROR, None),
            Behaviour::Gone => (StatusCode::GONE, None),
        }
    }
}

/// A successful delivery as the receiver saw it.
#[derive(Clone, Debug)]
pub struct Success {
    /// The `webhook-id`.
    pub event_id: String,
    /// The attempt that succeeded (`webhook-attempt`).
    pub attempt: u32,
}

#[derive(Default)]
struct Seen {
    /// Per endpoint, the order in which event ids were first seen.
    order: HashMap<String, HashMap<String, usize>>,
    successes: Vec<Success>,
    requests: usize,
}

/// The running receiver.
pub struct DemoReceiver {
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    stop: CancellationToken,
}

type Shared = (Arc<HashMap<String, Behaviour>>, Arc<Mutex<Seen>>);

impl DemoReceiver {
    /// Starts serving `/hooks/<endpoint>` for each endpoint on a free loopback port.
    pub async fn start(behaviours: HashMap<String, Behaviour>) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let behaviours = Arc::new(behaviours);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = CancellationToken::new();
        let shared: Shared = (behaviours, Arc::clone(&seen));
        let app = Router::new()
            .route("/hooks/{endpoint}", post(handle))
            .with_state(shared);
        let until = stop.clone();
        tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move { until.cancelled().await })
                .await;
            if let Err(error) = served {
                tracing::warn!(%error, "demo receiver stopped");
            }
        });
        Ok(DemoReceiver { addr, seen, stop })
    }

    /// The URL of an endpoint.
    pub fn url(&self, endpoint: &str) -> String {
        format!("http://{}/hooks/{endpoint}", self.addr)
    }

    /// Every successful delivery so far.
    pub fn successes(&self) -> Vec<Success> {
        lock(&self.seen).successes.clone()
    }

    /// How many requests arrived.
    pub fn requests(&self) -> usize {
        lock(&self.seen).requests
    }

    /// Stops serving.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn handle(
    State((behaviours, seen)): State<Shared>,
    Path(endpoint): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(behaviour) = behaviours.get(&endpoint).copied() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let event_id = header("webhook-id").unwrap_or_default();
    let attempt = header("webhook-attempt")
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let (status, retry_after) = {
        let mut seen = lock(&seen);
        seen.requests += 1;
        let order = seen.order.entry(endpoint).or_default();
        let next = order.len();
        let nth = *order.entry(event_id.clone()).or_insert(next);
        let (status, retry_after) = behaviour.reply(nth, attempt);
        if status.is_success() {
            seen.successes.push(Success { event_id, attempt });
        }
        (status, retry_after)
    };
    match retry_after {
        Some(seconds) => (status, [("retry-after", seconds)]).into_response(),
        None => status.into_response(),
    }
}
