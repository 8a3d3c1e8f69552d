//! The `[operator_webhooks]` section's validated settings.

use std::collections::BTreeSet;
use std::num::NonZeroU32;
use std::time::Duration;

use crate::config::{NoticeType, OperatorWebhooksConfig};
use crate::error::{DispatchError, Result};

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
