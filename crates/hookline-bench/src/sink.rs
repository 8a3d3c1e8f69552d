//! The HTTP sink both contestants deliver to: answers 204 at once and counts distinct
//! deliveries, noting when the first one and the last missing one arrived.
//!
//! A delivery is its `webhook-id` plus the request's query string: direct deliveries go to
//! `/hook` (no query), so they count by `webhook-id` alone; the fan-out scenario's endpoints
//! are `/hook?ep=<i>`, and the deliveries of one tenant event to different endpoints share
//! a `webhook-id`.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the sink saw since its last [`Sink::reset`].
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// Requests received.
    pub requests: u64,
    /// Distinct deliveries (`webhook-id` and query string).
    pub distinct: u64,
    /// Requests without a `webhook-id`.
    pub without_id: u64,
    /// When the first request arrived.
    pub first_at: Option<Instant>,
    /// When the `target`-th distinct delivery arrived.
    pub all_at: Option<Instant>,
}

#[derive(Default)]
struct Tally {
    /// Delivery keys seen, see [`delivery_key`].
    keys: HashSet<String>,
    target: u64,
    seen: Seen,
}

struct Shared {
    tally: Mutex<Tally>,
    distinct: watch::Sender<u64>,
}

/// The running sink; stops serving when dropped.
pub struct Sink {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Sink {
    /// Serves `POST /hook` (with any query string) on a free loopback port.
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the sink")?;
        let addr = listener.local_addr().context("the sink's address")?;
        let shared = Arc::new(Shared {
            tally: Mutex::new(Tally::default()),
            distinct: watch::Sender::new(0),
        });
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(Arc::clone(&shared));
        let server = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::error!(%error, "the sink stopped");
            }
        });
        Ok(Sink {
            addr,
            shared,
            server,
        })
    }

    /// The URL to deliver to; a query string may be added to tell endpoints apart.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Forgets everything seen and waits for `target` distinct deliveries next.
    pub fn reset(&self, target: u64) {
        *lock(&self.shared.tally) = Tally {
            target,
            ..Tally::default()
        };
        self.shared.distinct.send_replace(0);
    }

    /// Waits until the target number of distinct deliveries has arrived, at most `timeout`;
    /// returns whether it did.
    pub async fn wait_all(&self, timeout: Duration) -> bool {
        let target = lock(&self.shared.tally).target;
        let mut distinct = self.shared.distinct.subscribe();
        matches!(
            tokio::time::timeout(timeout, distinct.wait_for(|n| *n >= target)).await,
            Ok(Ok(_))
        )
    }

    /// What arrived since the last reset.
    pub fn seen(&self) -> Seen {
        lock(&self.shared.tally).seen.clone()
    }
}

async fn receive(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    _body: Bytes,
) -> StatusCode {
    let now = Instant::now();
    let mut tally = lock(&shared.tally);
    tally.seen.requests += 1;
    tally.seen.first_at.get_or_insert(now);
    match headers.get("webhook-id").and_then(|id| id.to_str().ok()) {
        Some(id) => {
            let key = delivery_key(id, query.as_deref());
            if !tally.keys.contains(&key) {
                tally.keys.insert(key);
                tally.seen.distinct += 1;
                if tally.seen.distinct == tally.target {
                    tally.seen.all_at = Some(now);
                }
                shared.distinct.send_replace(tally.seen.distinct);
            }
        }
        None => tally.seen.without_id += 1,
    }
    StatusCode::NO_CONTENT
}

/// What makes a delivery distinct: the `webhook-id` alone without a query string (the
/// direct runs), else the `webhook-id` and the query (one endpoint of the fan-out).
fn delivery_key(webhook_id: &str, query: Option<&str>) -> String {
    match query {
        None => webhook_id.to_owned(),
        Some(query) => format!("{webhook_id}?{query}"),
    }
}

fn lock(tally: &Mutex<Tally>) -> MutexGuard<'_, Tally> {
    // A panic while counting leaves consistent counts behind: keep serving.
    tally
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_an_id_once_per_query_string() {
        let sink = Sink::start().await.expect("sink");
        sink.reset(4);
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client");
        let post = |url: String, id: &'static str| {
            let request = client.post(url).header("webhook-id", id).send();
            async move { request.await.expect("posted").status() }
        };
        let base = sink.url();
        for (url, id) in [
            (base.clone(), "a"),
            (base.clone(), "a"),
            (base.clone(), "b"),
            (format!("{base}?ep=1"), "a"),
            (format!("{base}?ep=1"), "a"),
            (format!("{base}?ep=2"), "a"),
        ] {
            assert_eq!(post(url, id).await, StatusCode::NO_CONTENT);
        }
        let no_id = client.post(&base).send().await.expect("posted");
        assert_eq!(no_id.status(), StatusCode::NO_CONTENT);
        assert!(sink.wait_all(Duration::from_secs(5)).await);
        let seen = sink.seen();
        assert_eq!((seen.requests, seen.distinct, seen.without_id), (7, 4, 1));
        assert!(seen.all_at.is_some());
    }
}
