//! The cancellations' user-facing config (`[cancellations]`) and its validated settings.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{DispatchError, Result};

/// Cancellations (`hookline events cancel`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CancellationsConfig {
    /// Read the cancellations topic and honour it before each attempt. Default true; the
    /// topic must then exist (`hookline topics create` makes it).
    pub enabled: bool,
    /// Its topic; default `<topics.events>.cancellations`.
    pub topic: Option<String>,
    /// How long a cancellation is kept in memory after its `cancelled_at_ms`, in
    /// milliseconds: at least as long as an event may still be retried (the retry policy's
    /// maximum age, the longest tier). Default 604800000 (7 days, the events' retention,
    /// after which `hookline topics create` has the topic delete it too).
    pub forget_after_ms: u64,
    /// Most cancellations kept in memory; past it the oldest are forgotten first.
    /// Default 1000000.
    pub max_entries: usize,
}

impl Default for CancellationsConfig {
    fn default() -> Self {
        CancellationsConfig {
            enabled: true,
            topic: None,
            forget_after_ms: 7 * 24 * 3_600_000,
            max_entries: 1_000_000,
        }
    }
}

/// The cancellations' validated settings.
#[derive(Clone, Debug)]
pub struct CancellationsSettings {
    /// Whether the topic is read and honoured.
    pub enabled: bool,
    /// Its topic.
    pub topic: String,
    /// How long a cancellation is remembered.
    pub forget_after: Duration,
    /// The most remembered at once.
    pub max_entries: usize,
}

impl CancellationsConfig {
    /// Validates, deriving the default topic from the events topic.
    pub(crate) fn to_settings(&self, events_topic: &str) -> Result<CancellationsSettings> {
        if self.forget_after_ms == 0 {
            return Err(DispatchError::config(
                "cancellations.forget_after_ms",
                "must be positive",
            ));
        }
        if self.max_entries == 0 {
            return Err(DispatchError::config(
                "cancellations.max_entries",
                "must be at least 1",
            ));
        }
        let topic = match &self.topic {
            Some(topic) if topic.trim().is_empty() => {
                return Err(DispatchError::config(
                    "cancellations.topic",
                    "must not be empty",
                ));
            }
            Some(topic) => topic.clone(),
            None => format!("{events_topic}.cancellations"),
        };
        Ok(CancellationsSettings {
            enabled: self.enabled,
            topic,
            forget_after: Duration::from_millis(self.forget_after_ms),
            max_entries: self.max_entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_errors_name_the_field() {
        let settings = CancellationsConfig::default()
            .to_settings("ev")
            .expect("valid");
        assert_eq!(settings.topic, "ev.cancellations");
        assert!(settings.enabled);
        assert_eq!(settings.forget_after, Duration::from_secs(7 * 24 * 3600));
        let zero = CancellationsConfig {
            forget_after_ms: 0,
            ..CancellationsConfig::default()
        };
        let error = zero.to_settings("ev").expect_err("refused");
        assert!(error.to_string().contains("cancellations.forget_after_ms"));
        let empty = CancellationsConfig {
            topic: Some(" ".into()),
            ..CancellationsConfig::default()
        };
        let error = empty.to_settings("ev").expect_err("refused");
        assert!(error.to_string().contains("cancellations.topic"));
    }
}
