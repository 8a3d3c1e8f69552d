//! The user-facing `[operator_webhooks]` section and its validated settings.

use std::collections::BTreeSet;
use std::num::NonZeroU32;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::notice::NoticeType;
use crate::error::{DispatchError, Result};

/// hookline's own webhooks about itself (Svix calls them operational webhooks), sent to one
/// endpoint of the endpoints topic through hookline's own pipeline. Off unless
/// `endpoint_id` is set.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct OperatorWebhooksConfig {
    /// The endpoint (an id of the endpoints topic) the notices go to: its URL, signing
    /// secrets and keys, headers, TLS and retry policy are its own. Unset: off.
    pub endpoint_id: Option<String>,
    /// Which notice types are sent (`delivery.parked`, `endpoint.circuit_opened`,
    /// `endpoint.circuit_closed`, `endpoint.disabled`, `endpoint.enabled`). Default all.
    pub events: Vec<String>,
    /// At most one notice of a type about one endpoint per this many milliseconds (a fixed
    /// window, the same on every replica); the others are counted as `deduplicated`.
    /// Default 60000.
    pub min_interval_ms: u64,
    /// At most this many notices per minute over all types and endpoints (a token bucket
    /// that holds a minute's worth); the others are counted as `rate_limited`. Default 30.
    pub max_per_minute: u32,
}

impl Default for OperatorWebhooksConfig {
    fn default() -> Self {
        OperatorWebhooksConfig {
            endpoint_id: None,
            events: NoticeType::ALL
                .iter()
                .map(|t| t.as_str().to_owned())
                .collect(),
            min_interval_ms: 60_000,
            max_per_minute: 30,
        }
    }
}

/// The `[operator_webhooks]` section, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorWebhooksSettings {
    /// The operator endpoint.
    pub endpoint_id: String,
    /// The types sent.
    pub events: BTreeSet<NoticeType>,
    /// The dedup window per (type, endpoint).
    pub min_interval: Duration,
    /// The overall rate.
    pub max_per_minute: NonZeroU32,
}

impl OperatorWebhooksConfig {
    /// `None` when off (no `endpoint_id`); otherwise validated settings, naming the field at
    /// fault.
    pub(crate) fn to_settings(&self) -> Result<Option<OperatorWebhooksSettings>> {
        let Some(endpoint_id) = self.endpoint_id.as_deref() else {
            return Ok(None);
        };
        let endpoint_id = endpoint_id.trim();
        if endpoint_id.is_empty() || endpoint_id.len() > hookline_core::event::MAX_ID_LEN {
            return Err(DispatchError::config(
                "operator_webhooks.endpoint_id",
                format!("must be 1 to {} bytes", hookline_core::event::MAX_ID_LEN),
            ));
        }
        let mut events = BTreeSet::new();
        for name in &self.events {
            let Some(kind) = NoticeType::parse(name) else {
                return Err(DispatchError::config(
                    "operator_webhooks.events",
                    format!(
                        "{name:?} is not a notice type; use {}",
                        NoticeType::ALL.map(NoticeType::as_str).join(", ")
                    ),
                ));
            };
            events.insert(kind);
        }
        if self.min_interval_ms == 0 {
            return Err(DispatchError::config(
                "operator_webhooks.min_interval_ms",
                "must be at least 1",
            ));
        }
        let Some(max_per_minute) = NonZeroU32::new(self.max_per_minute) else {
            return Err(DispatchError::config(
                "operator_webhooks.max_per_minute",
                "must be at least 1",
            ));
        };
        Ok(Some(OperatorWebhooksSettings {
            endpoint_id: endpoint_id.to_owned(),
            events,
            min_interval: Duration::from_millis(self.min_interval_ms),
            max_per_minute,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_without_an_endpoint_and_every_type_by_default() {
        assert_eq!(
            OperatorWebhooksConfig::default().to_settings().ok(),
            Some(None)
        );
        let config = OperatorWebhooksConfig {
            endpoint_id: Some("ops".to_owned()),
            ..OperatorWebhooksConfig::default()
        };
        let settings = config.to_settings().expect("valid").expect("on");
        assert_eq!(settings.endpoint_id, "ops");
        assert_eq!(settings.events.len(), NoticeType::ALL.len());
        assert_eq!(settings.min_interval, Duration::from_secs(60));
        assert_eq!(settings.max_per_minute.get(), 30);
    }

    #[test]
    fn bad_values_name_their_field() {
        let on = |config: OperatorWebhooksConfig| OperatorWebhooksConfig {
            endpoint_id: config.endpoint_id.or(Some("ops".to_owned())),
            ..config
        };
        for (config, field) in [
            (
                OperatorWebhooksConfig {
                    endpoint_id: Some(" ".to_owned()),
                    ..OperatorWebhooksConfig::default()
                },
                "operator_webhooks.endpoint_id",
            ),
            (
                on(OperatorWebhooksConfig {
                    events: vec!["delivery.parkd".to_owned()],
                    ..OperatorWebhooksConfig::default()
                }),
                "operator_webhooks.events",
            ),
            (
                on(OperatorWebhooksConfig {
                    min_interval_ms: 0,
                    ..OperatorWebhooksConfig::default()
                }),
                "operator_webhooks.min_interval_ms",
            ),
            (
                on(OperatorWebhooksConfig {
                    max_per_minute: 0,
                    ..OperatorWebhooksConfig::default()
                }),
                "operator_webhooks.max_per_minute",
            ),
        ] {
            let error = config.to_settings().expect_err(field).to_string();
            assert!(error.contains(field), "{error}");
        }
    }
}
