//! The fan-out stage's validated settings, converted from its `[fanout]` config.

use std::time::Duration;

use crate::config::FanoutConfig;
use crate::error::{DispatchError, Result};

/// The fan-out stage's validated settings.
#[derive(Clone, Debug)]
pub struct FanoutSettings {
    /// Whether `hookline dispatch` runs it.
    pub enabled: bool,
    /// The topic of tenant events.
    pub topic: String,
    /// Its consumer group.
    pub group_id: String,
    /// This instance's transactional id.
    pub transactional_id: String,
    /// The transaction timeout.
    pub transaction_timeout: Duration,
    /// Most events per transaction.
    pub max_batch_events: usize,
    /// Most deliveries per transaction.
    pub max_batch_deliveries: usize,
    /// How long a batch waits for more events.
    pub linger: Duration,
}

impl FanoutConfig {
    /// Validates, deriving the defaults from the dispatcher's events topic, group and
    /// instance.
    pub(crate) fn to_settings(
        &self,
        events_topic: &str,
        group_id: &str,
        instance: &str,
    ) -> Result<FanoutSettings> {
        if !(1_000..=900_000).contains(&self.transaction_timeout_ms) {
            return Err(DispatchError::config(
                "fanout.transaction_timeout_ms",
                "must be 1000 to 900000 (the broker's default transaction.max.timeout.ms)",
            ));
        }
        if !(1..=10_000).contains(&self.max_batch_events) {
            return Err(DispatchError::config(
                "fanout.max_batch_events",
                "must be 1 to 10000",
            ));
        }
        if !(1..=1_000_000).contains(&self.max_batch_deliveries) {
            return Err(DispatchError::config(
                "fanout.max_batch_deliveries",
                "must be 1 to 1000000",
            ));
        }
        if self.linger_ms > 10_000 {
            return Err(DispatchError::config(
                "fanout.linger_ms",
                "must be at most 10000",
            ));
        }
        let named = |field: &'static str, value: &Option<String>, default: String| match value {
            Some(v) if v.trim().is_empty() => {
                Err(DispatchError::config(field, "must not be empty"))
            }
            Some(v) => Ok(v.clone()),
            None => Ok(default),
        };
        let topic = named(
            "fanout.topic",
            &self.topic,
            format!("{events_topic}.fanout"),
        )?;
        if topic == events_topic {
            return Err(DispatchError::config(
                "fanout.topic",
                "must differ from topics.events (deliveries and tenant events are apart)",
            ));
        }
        let group = named(
            "fanout.group_id",
            &self.group_id,
            format!("{group_id}.fanout"),
        )?;
        let transactional_id = named(
            "fanout.transactional_id",
            &self.transactional_id,
            format!("{group}-{instance}"),
        )?;
        Ok(FanoutSettings {
            enabled: self.enabled,
            topic,
            group_id: group,
            transactional_id,
            transaction_timeout: Duration::from_millis(self.transaction_timeout_ms),
            max_batch_events: self.max_batch_events,
            max_batch_deliveries: self.max_batch_deliveries,
            linger: Duration::from_millis(self.linger_ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(config: FanoutConfig) -> String {
        match config.to_settings("ev", "g", "i") {
            Err(DispatchError::Config { field, .. }) => field,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn defaults_derive_from_the_dispatcher() {
        let s = FanoutConfig::default()
            .to_settings("webhook-events", "hookline-dispatcher", "pod-0")
            .expect("valid");
        assert!(s.enabled);
        assert_eq!(s.topic, "webhook-events.fanout");
        assert_eq!(s.group_id, "hookline-dispatcher.fanout");
        assert_eq!(s.transactional_id, "hookline-dispatcher.fanout-pod-0");
        assert_eq!(s.transaction_timeout, Duration::from_secs(10));
    }

    #[test]
    fn bad_values_name_their_field() {
        let base = FanoutConfig::default;
        let cases = [
            (
                FanoutConfig {
                    transaction_timeout_ms: 10,
                    ..base()
                },
                "fanout.transaction_timeout_ms",
            ),
            (
                FanoutConfig {
                    max_batch_events: 0,
                    ..base()
                },
                "fanout.max_batch_events",
            ),
            (
                FanoutConfig {
                    max_batch_deliveries: 0,
                    ..base()
                },
                "fanout.max_batch_deliveries",
            ),
            (
                FanoutConfig {
                    linger_ms: 60_000,
                    ..base()
                },
                "fanout.linger_ms",
            ),
            (
                FanoutConfig {
                    topic: Some("ev".into()),
                    ..base()
                },
                "fanout.topic",
            ),
            (
                FanoutConfig {
                    topic: Some(" ".into()),
                    ..base()
                },
                "fanout.topic",
            ),
            (
                FanoutConfig {
                    group_id: Some(String::new()),
                    ..base()
                },
                "fanout.group_id",
            ),
        ];
        for (config, field) in cases {
            assert_eq!(field_of(config), field);
        }
    }
}
