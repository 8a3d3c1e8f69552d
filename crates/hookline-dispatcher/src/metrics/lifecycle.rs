//! The endpoint lifecycle's telemetry: endpoints disabled by this dispatcher, by reason,
//! and those of the endpoint table disabled now.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

/// The lifecycle's metrics.
#[derive(Clone, Debug)]
pub struct LifecycleMetrics {
    disabled_total: Family<ReasonLabel, Counter>,
    disabled: Gauge,
}

impl LifecycleMetrics {
    /// Creates and registers them.
    pub fn register(registry: &mut Registry) -> Self {
        let disabled_total = Family::<ReasonLabel, Counter>::default();
        let disabled = Gauge::default();
        registry.register(
            "webhook_endpoint_disabled",
            "Endpoints this dispatcher disabled, by reason (gone, failing)",
            disabled_total.clone(),
        );
        registry.register(
            "webhook_endpoints_disabled",
            "Endpoints of the endpoint table that are disabled now",
            disabled.clone(),
        );
        LifecycleMetrics {
            disabled_total,
            disabled,
        }
    }

    /// The gauge the endpoint table keeps at its number of disabled endpoints.
    pub fn disabled_gauge(&self) -> Gauge {
        self.disabled.clone()
    }

    /// An endpoint this dispatcher disabled, for `reason` (`gone`, `failing`).
    pub fn disabled(&self, reason: &str) {
        self.disabled_total
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }
}
