//! The attempt log's validated settings, converted from its `[attempts]` config.

use crate::config::AttemptsConfig;
use crate::error::{DispatchError, Result};

/// The attempt log's validated settings.
#[derive(Clone, Debug)]
pub struct AttemptsSettings {
    /// Whether the log is written.
    pub enabled: bool,
    /// Its topic.
    pub topic: String,
    /// The producer's queue, in records.
    pub buffer: usize,
    /// The producer's `linger.ms`.
    pub linger_ms: u64,
    /// The excerpt bound.
    pub max_body_excerpt_bytes: usize,
}

impl AttemptsConfig {
    /// Validates, deriving the default topic from the events topic.
    pub(crate) fn to_settings(&self, events_topic: &str) -> Result<AttemptsSettings> {
        if self.buffer == 0 {
            return Err(DispatchError::config(
                "attempts.buffer",
                "must be at least 1",
            ));
        }
        if self.linger_ms > 10_000 {
            return Err(DispatchError::config(
                "attempts.linger_ms",
                "must be at most 10000",
            ));
        }
        if self.retention_ms <= 0 {
            return Err(DispatchError::config(
                "attempts.retention_ms",
                "must be positive",
            ));
        }
        let topic = match &self.topic {
            Some(topic) if topic.trim().is_empty() => {
                return Err(DispatchError::config("attempts.topic", "must not be empty"));
            }
            Some(topic) => topic.clone(),
            None => format!("{events_topic}.attempts"),
        };
        Ok(AttemptsSettings {
            enabled: self.enabled,
            topic,
            buffer: self.buffer,
            linger_ms: self.linger_ms,
            max_body_excerpt_bytes: self.max_body_excerpt_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_events_topic() {
        let settings = AttemptsConfig::default().to_settings("ev").expect("valid");
        assert!(settings.enabled);
        assert_eq!(settings.topic, "ev.attempts");
        assert_eq!(settings.buffer, 10_000);
        assert_eq!(settings.linger_ms, 100);
        assert_eq!(settings.max_body_excerpt_bytes, 1024);
    }

    #[test]
    fn bad_values_name_their_field() {
        let zero = AttemptsConfig {
            buffer: 0,
            ..AttemptsConfig::default()
        };
        let error = zero.to_settings("ev").expect_err("refused").to_string();
        assert!(error.contains("attempts.buffer"), "{error}");
        let empty = AttemptsConfig {
            topic: Some(" ".to_owned()),
            ..AttemptsConfig::default()
        };
        let error = empty.to_settings("ev").expect_err("refused").to_string();
        assert!(error.contains("attempts.topic"), "{error}");
        let long = AttemptsConfig {
            linger_ms: 10_001,
            ..AttemptsConfig::default()
        };
        let error = long.to_settings("ev").expect_err("refused").to_string();
        assert!(error.contains("attempts.linger_ms"), "{error}");
    }
}
