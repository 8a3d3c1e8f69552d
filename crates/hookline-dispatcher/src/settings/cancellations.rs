//! The cancellations' validated settings, converted from their `[cancellations]` config.

use std::time::Duration;

use crate::config::CancellationsConfig;
use crate::error::{DispatchError, Result};

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
