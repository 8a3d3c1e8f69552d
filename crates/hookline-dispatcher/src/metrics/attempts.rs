//! The attempt log's telemetry: records written, and records dropped by reason.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// Why a record of the attempt log was not written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dropped {
    /// The buffer (or the producer's queue) was full.
    BufferFull,
    /// The broker did not take it (topic missing, timed out, refused).
    WriteFailed,
    /// It could not be encoded (a bug).
    Encoding,
}

impl Dropped {
    fn label(self) -> &'static str {
        match self {
            Dropped::BufferFull => "buffer_full",
            Dropped::WriteFailed => "write_failed",
            Dropped::Encoding => "encoding",
        }
    }
}

/// The attempt log's metrics.
#[derive(Clone, Debug, Default)]
pub(crate) struct AttemptLogMetrics {
    written: Counter,
    dropped: Family<ReasonLabel, Counter>,
}

impl AttemptLogMetrics {
    /// Registers every metric in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = AttemptLogMetrics::default();
        registry.register(
            "webhook_attempt_log_written",
            "Attempt-log records the broker acknowledged",
            metrics.written.clone(),
        );
        registry.register(
            "webhook_attempt_log_dropped",
            "Attempt-log records dropped, by reason (buffer_full, write_failed, encoding)",
            metrics.dropped.clone(),
        );
        metrics
    }

    pub(crate) fn written(&self) {
        self.written.inc();
    }

    pub(crate) fn dropped(&self, why: Dropped) {
        self.dropped
            .get_or_create(&ReasonLabel {
                reason: why.label(),
            })
            .inc();
    }
}
