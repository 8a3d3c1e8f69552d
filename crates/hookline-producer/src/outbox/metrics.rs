//! The relay's counters and gauge (Prometheus).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The relay's metrics; clones share the values.
#[derive(Clone, Debug, Default)]
pub struct OutboxMetrics {
    /// Tasks published and marked `COMPLETE` (`hookline_outbox_published_total`).
    pub published: Counter,
    /// Tasks that became `FAILED` (`hookline_outbox_failed_total`).
    pub failed: Counter,
    /// Publishes the event made fail, retried later (`hookline_outbox_retries_total`).
    pub retries: Counter,
    /// Publishes that failed because Kafka or the registry was unreachable
    /// (`hookline_outbox_kafka_errors_total`).
    pub kafka_errors: Counter,
    /// Statements that failed or timed out (`hookline_outbox_postgres_errors_total`).
    pub postgres_errors: Counter,
    /// Tasks not yet published, as last counted (`hookline_outbox_pending`).
    pub pending: Gauge,
}

impl OutboxMetrics {
    /// Adds the metrics to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "hookline_outbox_published",
            "Outbox tasks published and marked COMPLETE",
            self.published.clone(),
        );
        registry.register(
            "hookline_outbox_failed",
            "Outbox tasks that became FAILED after max_retries",
            self.failed.clone(),
        );
        registry.register(
            "hookline_outbox_retries",
            "Outbox publishes refused for the event, retried after a backoff",
            self.retries.clone(),
        );
        registry.register(
            "hookline_outbox_kafka_errors",
            "Outbox publishes that failed because Kafka or the registry was unreachable",
            self.kafka_errors.clone(),
        );
        registry.register(
            "hookline_outbox_postgres_errors",
            "Outbox statements that failed or timed out",
            self.postgres_errors.clone(),
        );
        registry.register(
            "hookline_outbox_pending",
            "Outbox tasks not yet published (NOT_CALLED or WIP)",
            self.pending.clone(),
        );
    }
}
