//! The sizes of every scenario of `hookline-bench all`: the issue's, or tiny ones for
//! `--quick`.

use serde::Serialize;

use crate::sink::Misbehaviour;

/// The sizes of every scenario.
#[derive(Clone, Debug, Serialize)]
pub struct Sizes {
    /// Whether these are the `--quick` sizes.
    pub quick: bool,
    /// Rounds of the ceiling, forwarder and pipeline.
    pub rounds: u32,
    /// Events (requests) of the ceiling, forwarder, pipeline and isolation.
    pub events: u64,
    /// Deliveries in flight at once: the forwarder's and the ceiling's bound, hookline's
    /// per-endpoint concurrency.
    pub concurrency: u32,
    /// Payload size, bytes.
    pub payload_bytes: usize,
    /// Many endpoints: endpoints, and events to each (interleaved).
    pub many_endpoints: u64,
    /// Many endpoints: events to each.
    pub many_events_each: u64,
    /// Slow: the in-flight limits tried.
    pub slow_limits: Vec<u32>,
    /// Slow: seconds of work at the limit's rate in each backlog.
    pub slow_seconds: u64,
    /// Isolation: the healthy endpoints (the dead one is one more).
    pub isolation_healthy_endpoints: u64,
    /// Isolation: the dead endpoint's timeout, ms.
    pub isolation_timeout_ms: u64,
    /// Retry timing: events per second, and for how long.
    pub retry_rate_per_s: u64,
    /// Retry timing: seconds of steady load.
    pub retry_seconds: u64,
    /// Retry timing: the quiet window over which idle CPU is sampled, ms.
    pub idle_window_ms: u64,
    /// Fan-out: tenant events.
    pub fanout_events: u64,
    /// Fan-out: endpoints of the tenant.
    pub fanout_endpoints: u64,
    /// Latency under load: events per second, and for how long.
    pub latency_rate_per_s: u64,
    /// Latency under load: seconds.
    pub latency_seconds: u64,
    /// Neighbours: the kinds of misbehaviour swept.
    pub neighbours_kinds: Vec<Misbehaviour>,
    /// Neighbours: the counts of misbehaving endpoints swept (besides none).
    pub neighbours_counts: Vec<u64>,
    /// The points chosen with `--neighbours` (empty: every kind at every count).
    pub neighbours_points: Vec<(Misbehaviour, u64)>,
    /// Neighbours: rounds of the sweep (alone and every point in each).
    pub neighbours_rounds: u32,
    /// Neighbours: the misbehaving endpoints' backlog, events.
    pub neighbours_backlog: u64,
    /// Neighbours: the stream's events per second (a third of them misbehaving endpoints').
    pub neighbours_rate_per_s: u64,
    /// Neighbours: the stream's seconds (long enough that one hiccup of the stack, tens
    /// of milliseconds of a few dozen deliveries, stays under the 1% a p99 shows).
    pub neighbours_seconds: u64,
}

impl Sizes {
    /// These sizes with the neighbours sweep cut to `points`, when any are given.
    pub fn with_points(mut self, points: &[(Misbehaviour, u64)]) -> Sizes {
        self.neighbours_points = points.to_vec();
        self
    }

    /// The neighbours sweep's points: the chosen ones, or every kind at every count.
    pub fn neighbours_points(&self) -> Vec<(Misbehaviour, u64)> {
        if !self.neighbours_points.is_empty() {
            return self.neighbours_points.clone();
        }
        self.neighbours_kinds
            .iter()
            .flat_map(|kind| self.neighbours_counts.iter().map(|count| (*kind, *count)))
            .collect()
    }

    /// The sizes, or tiny ones.
    pub fn new(quick: bool, rounds: Option<u32>, neighbours_rounds: Option<u32>) -> Self {
        if quick {
            Sizes {
                quick,
                rounds: rounds.unwrap_or(1),
                events: 500,
                concurrency: 16,
                payload_bytes: 256,
                many_endpoints: 100,
                many_events_each: 5,
                slow_limits: vec![50],
                slow_seconds: 1,
                isolation_healthy_endpoints: 9,
                isolation_timeout_ms: 2_000,
                retry_rate_per_s: 50,
                retry_seconds: 2,
                idle_window_ms: 1_000,
                fanout_events: 20,
                fanout_endpoints: 10,
                latency_rate_per_s: 200,
                latency_seconds: 2,
                neighbours_kinds: vec![Misbehaviour::Slow],
                neighbours_counts: vec![20],
                neighbours_points: Vec::new(),
                neighbours_rounds: neighbours_rounds.unwrap_or(1),
                neighbours_backlog: 40,
                neighbours_rate_per_s: 150,
                neighbours_seconds: 2,
            }
        } else {
            Sizes {
                quick,
                rounds: rounds.unwrap_or(3),
                events: 20_000,
                concurrency: 16,
                payload_bytes: 256,
                many_endpoints: 10_000,
                many_events_each: 10,
                slow_limits: vec![100, 500, 2_000],
                slow_seconds: 3,
                isolation_healthy_endpoints: 9,
                isolation_timeout_ms: 2_000,
                retry_rate_per_s: 100,
                retry_seconds: 30,
                idle_window_ms: 3_000,
                fanout_events: 1_000,
                fanout_endpoints: 100,
                latency_rate_per_s: 2_000,
                latency_seconds: 60,
                neighbours_kinds: Misbehaviour::ALL.to_vec(),
                neighbours_counts: vec![20, 100, 1_000],
                neighbours_points: Vec::new(),
                neighbours_rounds: neighbours_rounds.unwrap_or(3),
                neighbours_backlog: 5_000,
                neighbours_rate_per_s: 1_500,
                neighbours_seconds: 20,
            }
        }
    }
}
