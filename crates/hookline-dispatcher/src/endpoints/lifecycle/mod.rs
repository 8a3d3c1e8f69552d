//! Endpoint lifecycle: the per-endpoint clock of failures since the last success, the
//! decision to disable an endpoint (`410 Gone` at once, or failing for
//! `disable_after_failing_ms`), and the write-back of the disabled config to the endpoints
//! topic, conditional on the config the decision was made on.
//!
//! The clock is per replica: each dispatcher sees only its own attempts, and disables an
//! endpoint when every attempt *it* made failed for that long. The write-back is shared:
//! every replica's table then reads the disabled config from the topic.

mod state;

use std::sync::{Arc, Mutex};

use hookline_core::classify::Classification;
use hookline_core::endpoint::EndpointConfig;
use hookline_producer::{EndpointStore, PutIf};

use super::Endpoint;
use crate::metrics::LifecycleMetrics;
use crate::operator::{Operator, hooks};
use crate::settings::LifecycleSettings;

pub use state::{DisableReason, LifecycleState};

/// Disables endpoints: observes each attempt and writes a disabled config back.
#[derive(Clone)]
pub(crate) struct EndpointLifecycle {
    settings: LifecycleSettings,
    /// The endpoints topic; `None` (a file only): nothing can be written back.
    store: Option<Arc<EndpointStore>>,
    metrics: LifecycleMetrics,
    /// Told of every disable this dispatcher writes.
    operator: Operator,
}

impl EndpointLifecycle {
    pub fn new(
        settings: LifecycleSettings,
        store: Option<EndpointStore>,
        metrics: LifecycleMetrics,
    ) -> Self {
        EndpointLifecycle {
            settings,
            store: store.map(Arc::new),
            metrics,
            operator: Operator::off(),
        }
    }

    /// The same lifecycle, sending `endpoint.disabled` through `operator`.
    pub fn with_operator(self, operator: Operator) -> Self {
        EndpointLifecycle { operator, ..self }
    }

    /// Records one attempt to `endpoint`'s own URL; when it is to be disabled, starts the
    /// write-back (once at a time per endpoint) without holding up the delivery.
    pub fn observe(&self, endpoint: &Arc<Endpoint>, verdict: &Classification, now_ms: i64) {
        let mut state = lock(&endpoint.lifecycle);
        let Some(reason) = state.observe(verdict, now_ms, &self.settings) else {
            return;
        };
        let Some(store) = &self.store else {
            tracing::warn!(
                endpoint = endpoint.id,
                reason = reason.text(),
                "endpoint should be disabled, but there is no endpoints topic to write to"
            );
            return;
        };
        if state.disabling || !endpoint.config.enabled {
            return;
        }
        state.disabling = true;
        drop(state);
        let (store, metrics, endpoint) = (
            Arc::clone(store),
            self.metrics.clone(),
            Arc::clone(endpoint),
        );
        let operator = self.operator.clone();
        tokio::spawn(async move {
            if write_back(&store, &endpoint, &reason, now_ms, &metrics).await {
                hooks::disabled(&operator, &endpoint.id, &reason.text(), now_ms);
            }
            lock(&endpoint.lifecycle).disabling = false;
        });
    }
}

/// The config `seen` disabled for `reason` at `at_ms`.
pub fn disabled(seen: &EndpointConfig, reason: String, at_ms: i64) -> EndpointConfig {
    EndpointConfig {
        enabled: false,
        disabled_reason: Some(reason),
        disabled_at_ms: Some(at_ms.max(0)),
        ..seen.clone()
    }
}

/// Writes `endpoint` disabled, only if the topic still holds the config the decision was
/// made on: a newer config, or the same disable by another replica, is left as it is.
/// Whether it was written.
async fn write_back(
    store: &EndpointStore,
    endpoint: &Endpoint,
    reason: &DisableReason,
    at_ms: i64,
    metrics: &LifecycleMetrics,
) -> bool {
    let config = disabled(&endpoint.config, reason.text(), at_ms);
    match store
        .put_if_current(&endpoint.id, &endpoint.config, &config)
        .await
    {
        Ok(PutIf::Written) => {
            metrics.disabled(reason.code);
            tracing::warn!(
                endpoint = endpoint.id,
                reason = reason.text(),
                "endpoint disabled"
            );
            return true;
        }
        Ok(PutIf::Changed(_)) => tracing::info!(
            endpoint = endpoint.id,
            reason = reason.text(),
            "endpoint changed since the decision to disable it; left as it is"
        ),
        Err(error) => tracing::warn!(
            endpoint = endpoint.id,
            error = %error,
            "disabling the endpoint failed; the next failed attempt tries again"
        ),
    }
    false
}

fn lock(state: &Mutex<LifecycleState>) -> std::sync::MutexGuard<'_, LifecycleState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
