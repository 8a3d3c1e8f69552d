//! The HTTP sink every contestant delivers to. It counts distinct successful deliveries,
//! noting when the first request and the last missing delivery arrived, and measures each
//! delivery's latency and each retry's lateness.
//!
//! Routes (any query string):
//! - `/hook` answers 204 at once;
//! - `/slow` answers 204 after [`SLOW_MS`];
//! - `/dead` never answers (the caller's timeout ends the request);
//! - `/flaky?delay_ms=<n>` answers 503 to the first request of each delivery and 204 to the
//!   next, whose lateness is its arrival less the first's plus `n` ms;
//! - `/neighbour?kind=<slow|hang|fail|throttle>` misbehaves as a noisy neighbour does
//!   ([`Misbehaviour`]); its requests are counted apart and never as deliveries, so the
//!   figures of a run stay those of its healthy endpoints.
//!
//! A delivery is its `webhook-id` plus the request's query string: the fan-out's and the
//! many-endpoint scenario's endpoints are `/hook?ep=<i>`, and deliveries of one event to
//! different endpoints share a `webhook-id`. Ids that do not start with the run's prefix
//! are counted as foreign: a record of another run (a shared retry tier) was delivered.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::stats::Percentiles;

/// How long `/slow` takes to answer, in milliseconds.
pub const SLOW_MS: u64 = 100;
/// The event header the benchmark sets to when it published the event, in epoch
/// microseconds; hookline passes an event's headers on to the HTTP request.
pub const PUBLISHED_HEADER: &str = "x-bench-published-us";

/// How long a slow neighbour takes to answer, in milliseconds.
pub const NEIGHBOUR_SLOW_MS: u64 = 2_000;
/// The `Retry-After` a throttling neighbour sends, in seconds.
pub const NEIGHBOUR_RETRY_AFTER_S: u64 = 1;

/// How a neighbour endpoint (the `/neighbour` route) misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Misbehaviour {
    /// Answers 204 after [`NEIGHBOUR_SLOW_MS`].
    Slow,
    /// Never answers: the caller's timeout ends the request.
    Hang,
    /// Answers 500 at once.
    Fail,
    /// Answers 429 with `Retry-After: 1` ([`NEIGHBOUR_RETRY_AFTER_S`]) at once.
    Throttle,
}

impl Misbehaviour {
    /// Every kind, in the order reports list them.
    pub const ALL: [Misbehaviour; 4] = [
        Misbehaviour::Slow,
        Misbehaviour::Hang,
        Misbehaviour::Fail,
        Misbehaviour::Throttle,
    ];

    /// Its name, as in the route's query and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Misbehaviour::Slow => "slow",
            Misbehaviour::Hang => "hang",
            Misbehaviour::Fail => "fail",
            Misbehaviour::Throttle => "throttle",
        }
    }

    /// The kind a query string names (`kind=<name>`).
    fn of_query(query: Option<&str>) -> Option<Misbehaviour> {
        let name = query?
            .split('&')
            .find_map(|pair| pair.strip_prefix("kind="))?;
        Misbehaviour::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
    }
}

/// What the sink saw since its last [`Sink::reset`].
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// Requests received.
    pub requests: u64,
    /// Distinct deliveries answered 2xx (`webhook-id` and query string).
    pub distinct: u64,
    /// Requests without a `webhook-id`.
    pub without_id: u64,
    /// Requests whose `webhook-id` is not the run's (see [`Sink::reset`]).
    pub foreign: u64,
    /// First attempts `/flaky` answered 503.
    pub failed_first: u64,
    /// When the first request arrived.
    pub first_at: Option<Instant>,
    /// When the `target`-th distinct delivery arrived.
    pub all_at: Option<Instant>,
    /// Requests to `/neighbour`, of any kind.
    pub neighbour_requests: u64,
    /// Of those, the ones answered 2xx (slow neighbours' answers).
    pub neighbour_answered: u64,
}

#[derive(Default)]
struct Tally {
    /// Delivery keys answered 2xx, see [`delivery_key`].
    delivered: HashSet<String>,
    /// `/flaky` deliveries answered 503 once: when, in epoch microseconds.
    failed: HashMap<String, i64>,
    target: u64,
    prefix: String,
    /// Latencies count from here at the earliest (epoch µs): a backlog published before
    /// the contestant started counts from its start.
    available_us: i64,
    latencies_us: Vec<i64>,
    lateness_us: Vec<i64>,
    seen: Seen,
}

struct Shared {
    tally: Mutex<Tally>,
    distinct: watch::Sender<u64>,
    failed_first: watch::Sender<u64>,
}

#[derive(Clone, Copy, Debug)]
enum Route {
    Fast,
    Slow,
    Dead,
    Flaky,
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
    /// Serves the routes on a free loopback port.
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the sink")?;
        let addr = listener.local_addr().context("the sink's address")?;
        let shared = Arc::new(Shared {
            tally: Mutex::new(Tally::default()),
            distinct: watch::Sender::new(0),
            failed_first: watch::Sender::new(0),
        });
        let route = |route: Route| {
            post(
                move |state: State<Arc<Shared>>,
                      query: RawQuery,
                      headers: HeaderMap,
                      body: Bytes| { receive(route, state, query, headers, body) },
            )
        };
        let app = Router::new()
            .route("/hook", route(Route::Fast))
            .route("/slow", route(Route::Slow))
            .route("/dead", route(Route::Dead))
            .route("/flaky", route(Route::Flaky))
            .route("/neighbour", post(neighbour))
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

    /// The URL of `/hook`; a query string may be added to tell endpoints apart.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// The URL of another route: `slow`, `dead` or `flaky`.
    pub fn route_url(&self, route: &str) -> String {
        format!("http://{}/{route}", self.addr)
    }

    /// The URL of neighbour endpoint `index` misbehaving as `kind`.
    pub fn neighbour_url(&self, kind: Misbehaviour, index: u64) -> String {
        format!(
            "http://{}/neighbour?kind={}&ep={index}",
            self.addr,
            kind.name()
        )
    }

    /// Forgets everything seen and waits for `target` distinct deliveries of ids starting
    /// with `prefix` next; latencies count from now at the earliest.
    pub fn reset(&self, target: u64, prefix: &str) {
        *lock(&self.shared.tally) = Tally {
            target,
            prefix: prefix.to_owned(),
            available_us: now_us(),
            ..Tally::default()
        };
        self.shared.distinct.send_replace(0);
        self.shared.failed_first.send_replace(0);
    }

    /// Waits until `count` distinct deliveries have arrived, at most `timeout`.
    pub async fn wait_distinct(&self, count: u64, timeout: Duration) -> bool {
        let mut distinct = self.shared.distinct.subscribe();
        matches!(
            tokio::time::timeout(timeout, distinct.wait_for(|n| *n >= count)).await,
            Ok(Ok(_))
        )
    }

    /// Waits until `/flaky` has failed `count` first attempts, at most `timeout`.
    pub async fn wait_failed_first(&self, count: u64, timeout: Duration) -> bool {
        let mut failed = self.shared.failed_first.subscribe();
        matches!(
            tokio::time::timeout(timeout, failed.wait_for(|n| *n >= count)).await,
            Ok(Ok(_))
        )
    }

    /// What arrived since the last reset.
    pub fn seen(&self) -> Seen {
        lock(&self.shared.tally).seen.clone()
    }

    /// Latency of the deliveries since the last reset: from the publish time each carries
    /// (or the reset, if later) to the 2xx answer.
    pub fn latency(&self) -> Percentiles {
        Percentiles::of_micros(&mut lock(&self.shared.tally).latencies_us)
    }

    /// Lateness of the `/flaky` retries since the last reset: arrival less due time (the
    /// failed first attempt plus `delay_ms`).
    pub fn lateness(&self) -> Percentiles {
        Percentiles::of_micros(&mut lock(&self.shared.tally).lateness_us)
    }
}

async fn receive(
    route: Route,
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    _body: Bytes,
) -> StatusCode {
    match route {
        Route::Slow => tokio::time::sleep(Duration::from_millis(SLOW_MS)).await,
        Route::Dead => {
            // Counted on arrival, then held until the caller gives up.
            lock(&shared.tally).seen.requests += 1;
            std::future::pending::<()>().await;
        }
        Route::Fast | Route::Flaky => {}
    }
    let now = Instant::now();
    let now_us = now_us();
    let mut tally = lock(&shared.tally);
    tally.seen.requests += 1;
    tally.seen.first_at.get_or_insert(now);
    let Some(id) = headers.get("webhook-id").and_then(|id| id.to_str().ok()) else {
        tally.seen.without_id += 1;
        return StatusCode::NO_CONTENT;
    };
    if !id.starts_with(&tally.prefix) {
        tally.seen.foreign += 1;
        return StatusCode::NO_CONTENT;
    }
    let key = delivery_key(id, query.as_deref());
    if tally.delivered.contains(&key) {
        return StatusCode::NO_CONTENT;
    }
    if let Route::Flaky = route {
        match tally.failed.get(&key).copied() {
            None => {
                tally.failed.insert(key, now_us);
                tally.seen.failed_first += 1;
                shared.failed_first.send_replace(tally.seen.failed_first);
                return StatusCode::SERVICE_UNAVAILABLE;
            }
            Some(failed_at) => {
                let delay_us = delay_ms(query.as_deref()).saturating_mul(1000);
                tally
                    .lateness_us
                    .push(now_us - failed_at.saturating_add(delay_us));
            }
        }
    }
    if let Some(published) = headers
        .get(PUBLISHED_HEADER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<i64>().ok())
    {
        let from = published.max(tally.available_us);
        tally.latencies_us.push(now_us - from);
    }
    tally.delivered.insert(key);
    tally.seen.distinct += 1;
    if tally.seen.distinct == tally.target {
        tally.seen.all_at = Some(now);
    }
    shared.distinct.send_replace(tally.seen.distinct);
    StatusCode::NO_CONTENT
}

/// A neighbour's answer: counted apart from the deliveries, as its kind misbehaves. A
/// query without a known kind hangs.
async fn neighbour(State(shared): State<Arc<Shared>>, RawQuery(query): RawQuery) -> Response {
    lock(&shared.tally).seen.neighbour_requests += 1;
    match Misbehaviour::of_query(query.as_deref()).unwrap_or(Misbehaviour::Hang) {
        Misbehaviour::Slow => {
            tokio::time::sleep(Duration::from_millis(NEIGHBOUR_SLOW_MS)).await;
            lock(&shared.tally).seen.neighbour_answered += 1;
            StatusCode::NO_CONTENT.into_response()
        }
        Misbehaviour::Hang => std::future::pending().await,
        Misbehaviour::Fail => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        Misbehaviour::Throttle => (
            StatusCode::TOO_MANY_REQUESTS,
            [(RETRY_AFTER, NEIGHBOUR_RETRY_AFTER_S.to_string())],
        )
            .into_response(),
    }
}

/// What makes a delivery distinct: the `webhook-id` alone without a query string, else
/// the `webhook-id` and the query (one endpoint of several).
fn delivery_key(webhook_id: &str, query: Option<&str>) -> String {
    match query {
        None => webhook_id.to_owned(),
        Some(query) => format!("{webhook_id}?{query}"),
    }
}

/// `delay_ms=<n>` from a query string; 0 without it.
fn delay_ms(query: Option<&str>) -> i64 {
    query
        .into_iter()
        .flat_map(|query| query.split('&'))
        .find_map(|pair| pair.strip_prefix("delay_ms="))
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

/// Now, in epoch microseconds.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
        })
}

fn lock(tally: &Mutex<Tally>) -> MutexGuard<'_, Tally> {
    // A panic while counting leaves consistent counts behind: keep serving.
    tally
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
