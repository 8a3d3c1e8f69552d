//! The operational webhooks' telemetry: notices by type and outcome.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::config::NoticeType;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NoticeLabels {
    r#type: &'static str,
    outcome: &'static str,
}

/// `webhook_operator_notices_total{type, outcome}`.
#[derive(Clone, Debug, Default)]
pub(crate) struct OperatorMetrics {
    notices: Family<NoticeLabels, Counter>,
}

impl OperatorMetrics {
    /// Registers every metric in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = OperatorMetrics::default();
        registry.register(
            "webhook_operator_notices",
            "Operational webhooks by type and outcome (sent: published to the events topic; \
             deduplicated, rate_limited, about_operator: not sent; dropped: the buffer was \
             full or the publish failed)",
            metrics.notices.clone(),
        );
        metrics
    }

    pub(crate) fn count(&self, kind: NoticeType, outcome: &'static str) {
        self.notices
            .get_or_create(&NoticeLabels {
                r#type: kind.as_str(),
                outcome,
            })
            .inc();
    }
}
