//! Delivery telemetry as named events: each one emits its log line and its metric together,
//! with low-cardinality labels (reason codes, tier names; never URLs or messages).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookline_core::breaker::BreakerState;
use hookline_core::classify::Classification;
use hookline_core::state::DeliveryState;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

mod attempts;
mod fanout;
mod lifecycle;
mod operator;

pub(crate) use attempts::{AttemptLogMetrics, Dropped};
pub(crate) use fanout::{FanoutMetrics, FanoutOutcome};
pub(crate) use lifecycle::LifecycleMetrics;
pub(crate) use operator::OperatorMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TierLabel {
    tier: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LedgerLabel {
    store: &'static str,
    op: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// The tier label of a deferral to the slow lane.
pub(crate) const LANE: &str = "lane";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeferLabel {
    tier: String,
    why: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CircuitLabel {
    endpoint: String,
    state: &'static str,
}

/// Most endpoints `webhook_circuit_open` names at once: a series exists only while an
/// endpoint's breaker is not closed, and past this many the rest are only counted in
/// `webhook_circuits_open`, so that an outage of every endpoint cannot flood Prometheus.
pub const MAX_CIRCUIT_SERIES: usize = 256;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabel {
    code: String,
}

/// The dispatcher's metrics, registered in one Prometheus registry.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    deliveries: Family<StatusLabel, Counter>,
    attempts: Family<OutcomeLabel, Counter>,
    retries: Family<TierLabel, Counter>,
    dlq: Family<ReasonLabel, Counter>,
    ledger_errors: Family<LedgerLabel, Counter>,
    deferrals: Family<DeferLabel, Counter>,
    hops: Family<TierLabel, Counter>,
    circuits: Family<StateLabel, Counter>,
    /// The endpoints whose breaker last changed to open or half-open, with that state; its
    /// size is `circuits_open`.
    open_circuits: Arc<Mutex<OpenCircuits>>,
    circuits_open: Gauge,
    /// 1 for each endpoint whose breaker is open or half-open (at most
    /// [`MAX_CIRCUIT_SERIES`] of them), by endpoint id and state.
    circuit_open: Family<CircuitLabel, Gauge>,
    consumer_errors: Family<CodeLabel, Counter>,
    registry_waits: Counter,
    dlq_refused: Counter,
    paused: Family<StateLabel, Gauge>,
    admission: Family<StateLabel, Gauge>,
    latency: Histogram,
    in_flight: Gauge,
    lag: Gauge,
    totals: Arc<Mutex<Totals>>,
    /// The series every delivery writes, looked up once.
    every: Arc<EveryDelivery>,
    /// The fan-out stage's metrics, in the same registry.
    pub(crate) fanout: FanoutMetrics,
    pub(crate) attempt_log: AttemptLogMetrics,
    /// The endpoint lifecycle's metrics, in the same registry.
    pub(crate) lifecycle: LifecycleMetrics,
    /// The operational webhooks' metrics, in the same registry.
    pub(crate) operator: OperatorMetrics,
}

/// The series that every delivery writes, taken from their families when the metrics are
/// made: a family's lookup hashes the labels (SipHash) and takes the family's lock, four
/// times per delivery. They are therefore exposed from the start, at 0.
struct EveryDelivery {
    /// `webhook_state_transitions_total`, by [`DeliveryState`] in the order of
    /// [`DeliveryState::ALL`], which is their declaration's (`state as usize`).
    transitions: [Counter; DeliveryState::ALL.len()],
    succeeded: Counter,
    attempt_succeeded: Counter,
}

/// The breakers that are not closed, and which of them have a `webhook_circuit_open` series.
#[derive(Debug, Default)]
struct OpenCircuits {
    states: BTreeMap<String, BreakerState>,
    labelled: BTreeSet<String>,
}

/// Running totals of one dispatcher, for programs that embed it (the demo's summary).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Deliveries that succeeded.
    pub succeeded: u64,
    /// Copies not delivered because the ledger knew the endpoint had the event already.
    pub duplicates_suppressed: u64,
    /// Records scheduled into each retry tier (by tier suffix), deferrals included, hops not.
    pub retries_by_tier: BTreeMap<String, u64>,
    /// Records parked in the DLQ, by reason code.
    pub dlq_by_reason: BTreeMap<String, u64>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let deliveries = Family::<StatusLabel, Counter>::default();
        let attempts = Family::<OutcomeLabel, Counter>::default();
        let retries = Family::<TierLabel, Counter>::default();
        let dlq = Family::<ReasonLabel, Counter>::default();
        let transitions = Family::<StateLabel, Counter>::default();
        let ledger_errors = Family::<LedgerLabel, Counter>::default();
        let deferrals = Family::<DeferLabel, Counter>::default();
        let hops = Family::<TierLabel, Counter>::default();
        let circuits = Family::<StateLabel, Counter>::default();
        let circuits_open = Gauge::default();
        let circuit_open = Family::<CircuitLabel, Gauge>::default();
        let consumer_errors = Family::<CodeLabel, Counter>::default();
        let registry_waits = Counter::default();
        let dlq_refused = Counter::default();
        let paused = Family::<StateLabel, Gauge>::default();
        let admission = Family::<StateLabel, Gauge>::default();
        let latency = Histogram::new(exponential_buckets(0.005, 2.0, 14));
        let in_flight = Gauge::default();
        let lag = Gauge::default();
        registry.register(
            "webhook_delivery",
            "Deliveries by final status (succeeded, duplicate_suppressed, retry_scheduled, dlq)",
            deliveries.clone(),
        );
        registry.register(
            "webhook_attempts",
            "HTTP attempts by outcome code",
            attempts.clone(),
        );
        registry.register(
            "webhook_retries",
            "Records scheduled into a retry tier",
            retries.clone(),
        );
        registry.register(
            "webhook_dlq",
            "Records parked in the DLQ by reason",
            dlq.clone(),
        );
        registry.register(
            "webhook_state_transitions",
            "Delivery state machine transitions by target state",
            transitions.clone(),
        );
        registry.register(
            "webhook_ledger_errors",
            "Delivery ledger commands (Redis) and statements (PostgreSQL) that failed or timed out, by store and step",
            ledger_errors.clone(),
        );
        registry.register(
            "webhook_deferrals",
            "Records put off without an attempt to a tier or to the slow lane (tier \"lane\"), by tier and cause",
            deferrals.clone(),
        );
        registry.register(
            "webhook_tier_hops",
            "Tier records written again because their wait outlasts the tier",
            hops.clone(),
        );
        registry.register(
            "webhook_circuit_transitions",
            "Endpoint circuit breaker changes, by the state entered",
            circuits.clone(),
        );
        registry.register(
            "webhook_circuits_open",
            "Endpoints whose circuit breaker is open or half-open now",
            circuits_open.clone(),
        );
        registry.register(
            "webhook_circuit_open",
            "1 while an endpoint's circuit breaker is open or half-open, by endpoint and state (at most 256 endpoints; all are counted in webhook_circuits_open)",
            circuit_open.clone(),
        );
        registry.register(
            "webhook_consumer_errors",
            "Errors the consumer reported while fetching, by error code",
            consumer_errors.clone(),
        );
        registry.register(
            "webhook_registry_waits",
            "Waits for a schema registry that could not answer while decoding",
            registry_waits.clone(),
        );
        registry.register(
            "webhook_dlq_write_refused",
            "DLQ writes refused by the topic even after cutting the envelope",
            dlq_refused.clone(),
        );
        registry.register(
            "webhook_paused_partitions",
            "Partitions paused now, by cause (not_due, window_full, chain_full)",
            paused.clone(),
        );
        registry.register(
            "webhook_delivery_latency_seconds",
            "Duration of one HTTP attempt",
            latency.clone(),
        );
        registry.register(
            "webhook_slow_budget",
            "The budget slow and new endpoints share: units held (slow_units) and slow-lane records waiting for one (lane_waiting)",
            admission.clone(),
        );
        registry.register(
            "webhook_in_flight",
            "Deliveries running now",
            in_flight.clone(),
        );
        registry.register(
            "webhook_consumer_lag",
            "Records behind the high watermarks of the assigned partitions",
            lag.clone(),
        );
        let fanout = FanoutMetrics::register(&mut registry);
        let attempt_log = AttemptLogMetrics::register(&mut registry);
        let lifecycle = LifecycleMetrics::register(&mut registry);
        let operator = OperatorMetrics::register(&mut registry);
        let every = Arc::new(EveryDelivery {
            transitions: DeliveryState::ALL.map(|state| {
                let state = state.as_str();
                transitions.get_or_create(&StateLabel { state }).clone()
            }),
            succeeded: deliveries
                .get_or_create(&StatusLabel {
                    status: "succeeded",
                })
                .clone(),
            attempt_succeeded: attempts
                .get_or_create(&OutcomeLabel {
                    outcome: Classification::Success.code(),
                })
                .clone(),
        });
        Metrics {
            every,
            operator,
            fanout,
            attempt_log,
            lifecycle,
            registry: Arc::new(registry),
            deliveries,
            attempts,
            retries,
            dlq,
            ledger_errors,
            deferrals,
            hops,
            circuits,
            open_circuits: Arc::default(),
            circuits_open,
            circuit_open,
            consumer_errors,
            registry_waits,
            dlq_refused,
            paused,
            admission,
            latency,
            in_flight,
            lag,
            totals: Arc::default(),
        }
    }

    /// The totals so far.
    pub fn totals(&self) -> Totals {
        self.lock_totals().clone()
    }

    fn lock_totals(&self) -> std::sync::MutexGuard<'_, Totals> {
        self.totals
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    pub(crate) fn transition(&self, state: DeliveryState) {
        self.every.transitions[state as usize].inc();
    }

    pub(crate) fn attempt(&self, classification: &Classification, took: Duration) {
        if let Classification::Success = classification {
            self.every.attempt_succeeded.inc();
        } else {
            let outcome = classification.code();
            self.attempts.get_or_create(&OutcomeLabel { outcome }).inc();
        }
        self.latency.observe(took.as_secs_f64());
    }

    pub(crate) fn delivered(&self) {
        self.every.succeeded.inc();
        self.lock_totals().succeeded += 1;
    }

    pub(crate) fn duplicate_suppressed(&self) {
        let status = StatusLabel {
            status: "duplicate_suppressed",
        };
        self.deliveries.get_or_create(&status).inc();
        self.lock_totals().duplicates_suppressed += 1;
    }

    pub(crate) fn ledger_error(&self, store: &'static str, op: &'static str) {
        self.ledger_errors
            .get_or_create(&LedgerLabel { store, op })
            .inc();
    }

    pub(crate) fn retry_scheduled(&self, tier: &str) {
        let status = StatusLabel {
            status: "retry_scheduled",
        };
        self.deliveries.get_or_create(&status).inc();
        self.retries
            .get_or_create(&TierLabel {
                tier: tier.to_owned(),
            })
            .inc();
        *self
            .lock_totals()
            .retries_by_tier
            .entry(tier.to_owned())
            .or_default() += 1;
    }

    pub(crate) fn parked(&self, reason: &'static str) {
        self.deliveries
            .get_or_create(&StatusLabel { status: "dlq" })
            .inc();
        self.dlq.get_or_create(&ReasonLabel { reason }).inc();
        *self
            .lock_totals()
            .dlq_by_reason
            .entry(reason.to_owned())
            .or_default() += 1;
    }

    pub(crate) fn deferred(&self, tier: &str, why: &'static str) {
        let label = DeferLabel {
            tier: tier.to_owned(),
            why,
        };
        self.deferrals.get_or_create(&label).inc();
        if tier != LANE {
            self.retry_scheduled(tier);
        }
    }

    pub(crate) fn hopped(&self, tier: &str) {
        let label = TierLabel {
            tier: tier.to_owned(),
        };
        self.hops.get_or_create(&label).inc();
    }

    pub(crate) fn breaker_changed(&self, endpoint: &str, state: BreakerState) {
        let open = {
            let mut open = self
                .open_circuits
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let was = match state {
                BreakerState::Open | BreakerState::HalfOpen => {
                    open.states.insert(endpoint.to_owned(), state)
                }
                BreakerState::Closed => open.states.remove(endpoint),
            };
            if let Some(was) = was {
                self.circuit_open.remove(&CircuitLabel {
                    endpoint: endpoint.to_owned(),
                    state: was.as_str(),
                });
            }
            let labelled = open.labelled.contains(endpoint);
            match state {
                BreakerState::Open | BreakerState::HalfOpen
                    if labelled || open.labelled.len() < MAX_CIRCUIT_SERIES =>
                {
                    open.labelled.insert(endpoint.to_owned());
                    self.circuit_open
                        .get_or_create(&CircuitLabel {
                            endpoint: endpoint.to_owned(),
                            state: state.as_str(),
                        })
                        .set(1);
                }
                BreakerState::Open | BreakerState::HalfOpen => {}
                BreakerState::Closed => {
                    open.labelled.remove(endpoint);
                }
            }
            open.states.len()
        };
        self.circuits_open
            .set(i64::try_from(open).unwrap_or(i64::MAX));
        let state = state.as_str();
        self.circuits.get_or_create(&StateLabel { state }).inc();
        tracing::warn!(endpoint, state, "endpoint circuit breaker changed");
    }

    pub(crate) fn consumer_error(&self, code: String) {
        self.consumer_errors
            .get_or_create(&CodeLabel { code })
            .inc();
    }

    pub(crate) fn registry_wait(&self) {
        self.registry_waits.inc();
    }

    pub(crate) fn dlq_write_refused(&self) {
        self.dlq_refused.inc();
    }

    pub(crate) fn set_paused(&self, state: &'static str, count: usize) {
        let value = i64::try_from(count).unwrap_or(i64::MAX);
        self.paused.get_or_create(&StateLabel { state }).set(value);
    }

    /// The slow endpoints' budget: units of the pool held, and lane records waiting.
    pub(crate) fn set_slow_budget(&self, units: usize, lane_waiting: usize) {
        for (state, value) in [("slow_units", units), ("lane_waiting", lane_waiting)] {
            let value = i64::try_from(value).unwrap_or(i64::MAX);
            self.admission
                .get_or_create(&StateLabel { state })
                .set(value);
        }
    }

    pub(crate) fn set_in_flight(&self, value: usize) {
        self.in_flight.set(i64::try_from(value).unwrap_or(i64::MAX));
    }

    pub(crate) fn set_lag(&self, value: i64) {
        self.lag.set(value);
    }
}

#[cfg(test)]
mod tests;
