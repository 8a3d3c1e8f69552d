//! A real HTTP receiver on 127.0.0.1:0 for end-to-end tests: each path follows a script
//! (answer with a status, fail the first k requests, hang) and every request is recorded.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tokio_util::sync::CancellationToken;

/// What a path answers to its n-th request (counting from 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Answer with this status.
    Status(u16),
    /// Answer 429 with a `Retry-After` of this many seconds.
    TooManyRequests {
        /// The Retry-After value in seconds.
        retry_after_s: u64,
    },
    /// Answer with `status` after `delay_ms`.
    Slow {
        /// The delay in milliseconds.
        delay_ms: u64,
        /// The status.
        status: u16,
    },
    /// Answer with `status` and this body (`text/plain`).
    Body {
        /// The status.
        status: u16,
        /// The response body.
        body: String,
    },
    /// Never answer (the connection stays open until the client gives up).
    Hang,
}

/// A path's script.
pub type Script = Arc<dyn Fn(usize) -> Reply + Send + Sync>;

/// One received request.
#[derive(Clone, Debug)]
pub struct Received {
    /// The path's name (`/hooks/<name>`).
    pub name: String,
    /// The request headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
    /// When it arrived.
    pub at: Instant,
    /// What it was answered.
    pub reply: Reply,
}

impl Received {
    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

#[derive(Default)]
struct Inner {
    scripts: HashMap<String, Script>,
    counts: HashMap<String, usize>,
    received: Vec<Received>,
}

/// The receiver. Dropping it stops the server.
pub struct Receiver {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    stop: CancellationToken,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn lock(inner: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    inner
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Receiver {
    /// Starts a receiver on a free loopback port.
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("bound address");
        let inner = Arc::new(Mutex::new(Inner::default()));
        let stop = CancellationToken::new();
        let app = Router::new()
            .route("/hooks/{name}", post(handle))
            .with_state(Arc::clone(&inner));
        let until = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { until.cancelled().await })
                .await;
        });
        Receiver { addr, inner, stop }
    }

    /// Scripts the path `/hooks/<name>` and returns its URL.
    pub fn script(
        &self,
        name: &str,
        script: impl Fn(usize) -> Reply + Send + Sync + 'static,
    ) -> String {
        lock(&self.inner)
            .scripts
            .insert(name.to_owned(), Arc::new(script));
        self.url(name)
    }

    /// The URL of `/hooks/<name>`.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/hooks/{name}", self.addr)
    }

    /// Every request received on `name` so far, in arrival order.
    pub fn received(&self, name: &str) -> Vec<Received> {
        lock(&self.inner)
            .received
            .iter()
            .filter(|r| r.name == name)
            .cloned()
            .collect()
    }

    /// How many requests `name` received so far (hanging ones included).
    pub fn count(&self, name: &str) -> usize {
        lock(&self.inner).counts.get(name).copied().unwrap_or(0)
    }
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reply = {
        let mut inner = lock(&inner);
        let index = {
            let count = inner.counts.entry(name.clone()).or_insert(0);
            *count += 1;
            *count - 1
        };
        let reply = inner
            .scripts
            .get(&name)
            .map_or(Reply::Status(404), |script| script(index));
        inner.received.push(Received {
            name: name.clone(),
            headers,
            body,
            at: Instant::now(),
            reply: reply.clone(),
        });
        reply
    };
    match reply {
        Reply::Status(status) => StatusCode::from_u16(status)
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            .into_response(),
        Reply::TooManyRequests { retry_after_s } => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", retry_after_s.to_string())],
        )
            .into_response(),
        Reply::Slow { delay_ms, status } => {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            StatusCode::from_u16(status)
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
                .into_response()
        }
        Reply::Body { status, body } => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            [("content-type", "text/plain; charset=utf-8")],
            body,
        )
            .into_response(),
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            StatusCode::GATEWAY_TIMEOUT.into_response()
        }
    }
}
