//! The fan-out stage's metrics: tenant events by outcome, deliveries written per event,
//! latency to commit, transactions by outcome (`fanout::stage` emits them with its logs).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// What became of one tenant event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FanoutOutcome {
    /// Deliveries were written for its subscribers.
    FannedOut,
    /// No endpoint of the tenant subscribes to it: counted and logged, not parked.
    NoSubscribers,
    /// It could not be fanned out and went to the DLQ.
    Parked,
}

impl FanoutOutcome {
    fn label(self) -> &'static str {
        match self {
            FanoutOutcome::FannedOut => "fanned_out",
            FanoutOutcome::NoSubscribers => "no_subscribers",
            FanoutOutcome::Parked => "parked",
        }
    }
}

/// The fan-out stage's metrics.
#[derive(Clone, Debug)]
pub(crate) struct FanoutMetrics {
    events: Family<OutcomeLabel, Counter>,
    deliveries: Counter,
    per_event: Histogram,
    latency: Histogram,
    transactions: Family<OutcomeLabel, Counter>,
}

impl FanoutMetrics {
    /// Registers every metric in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = FanoutMetrics {
            events: Family::default(),
            deliveries: Counter::default(),
            per_event: Histogram::new(exponential_buckets(1.0, 4.0, 10)),
            latency: Histogram::new(exponential_buckets(0.002, 2.0, 14)),
            transactions: Family::default(),
        };
        registry.register(
            "webhook_fanout",
            "Tenant events by what became of them (fanned_out, no_subscribers, parked)",
            metrics.events.clone(),
        );
        registry.register(
            "webhook_fanout_deliveries",
            "Deliveries written by the fan-out stage",
            metrics.deliveries.clone(),
        );
        registry.register(
            "webhook_fanout_deliveries_per_event",
            "Deliveries written for one tenant event",
            metrics.per_event.clone(),
        );
        registry.register(
            "webhook_fanout_latency_seconds",
            "From a tenant event's Kafka timestamp to the commit of its deliveries",
            metrics.latency.clone(),
        );
        registry.register(
            "webhook_fanout_transactions",
            "Fan-out transactions by outcome (committed, aborted)",
            metrics.transactions.clone(),
        );
        metrics
    }

    /// One tenant event's outcome, with `deliveries` written for it.
    pub(crate) fn event(&self, outcome: FanoutOutcome, deliveries: usize) {
        self.events
            .get_or_create(&OutcomeLabel {
                outcome: outcome.label(),
            })
            .inc();
        if outcome == FanoutOutcome::FannedOut {
            self.deliveries.inc_by(deliveries as u64);
            self.per_event.observe(deliveries as f64);
        }
    }

    /// A transaction committed; `latency` of each of its events.
    pub(crate) fn committed(&self, latencies: impl IntoIterator<Item = Duration>) {
        self.transaction("committed");
        for latency in latencies {
            self.latency.observe(latency.as_secs_f64());
        }
    }

    /// A transaction ended otherwise.
    pub(crate) fn transaction(&self, outcome: &'static str) {
        self.transactions
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }
}
