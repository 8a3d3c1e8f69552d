//! The HTTP sink both contestants deliver to: answers 204 at once and counts deliveries by
//! `webhook-id`, noting when the first one and the last missing one arrived.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the sink saw since its last [`Sink::reset`].
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// Requests received.
    pub requests: u64,
    /// Distinct `webhook-id`s.
    pub distinct: u64,
    /// Requests without a `webhook-id`.
    pub without_id: u64,
    /// When the first request arrived.
    pub first_at: Option<Instant>,
    /// When the `target`-th distinct id arrived.
    pub all_at: Option<Instant>,
}

#[derive(Default)]
struct Tally {
    ids: HashSet<String>,
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
    /// Serves `POST /hook` on a free loopback port.
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

    /// The URL to deliver to.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Forgets everything seen and waits for `target` distinct ids next.
    pub fn reset(&self, target: u64) {
        *lock(&self.shared.tally) = Tally {
            target,
            ..Tally::default()
        };
        self.shared.distinct.send_replace(0);
    }

    /// Waits until the target number of distinct ids has arrived, at most `timeout`;
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
    headers: HeaderMap,
    _body: Bytes,
) -> StatusCode {
    let now = Instant::now();
    let mut tally = lock(&shared.tally);
    tally.seen.requests += 1;
    tally.seen.first_at.get_or_insert(now);
    match headers.get("webhook-id").and_then(|id| id.to_str().ok()) {
        Some(id) => {
            if !tally.ids.contains(id) {
                tally.ids.insert(id.to_owned());
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

fn lock(tally: &Mutex<Tally>) -> MutexGuard<'_, Tally> {
    // A panic while counting leaves consistent counts behind: keep serving.
    tally
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
