//! The attempt log's user-facing config (`[attempts]`) and its validated settings.

use serde::{Deserialize, Serialize};

use crate::error::{DispatchError, Result};

/// The attempt log.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AttemptsConfig {
    /// Write the attempt log. Default true.
    pub enabled: bool,
    /// Its topic; default `<topics.events>.attempts`.
    pub topic: Option<String>,
    /// Records held by the log's producer until the broker acknowledges them; one more is
    /// dropped (and counted in `webhook_attempt_log_dropped_total`), never waited for.
    /// Default 10000.
    pub buffer: usize,
    /// How long the log's producer waits to fill a batch before sending it, in
    /// milliseconds (librdkafka's `linger.ms`; at most 10000). Default 100: the broker's
    /// cost is mostly per produce request (a batch per partition), and the log is read by
    /// people, for whom a tenth of a second is nothing; at 20 ms the broker spent about
    /// twice the CPU on the log (`hookline-bench`'s broker column).
    pub linger_ms: u64,
    /// Most bytes of a response body kept in a record (URL query strings redacted).
    /// Default 1024.
    pub max_body_excerpt_bytes: usize,
    /// How long `hookline topics create` has the topic keep records, in milliseconds.
    /// Default 604800000 (7 days).
    pub retention_ms: i64,
}

impl Default for AttemptsConfig {
    fn default() -> Self {
        AttemptsConfig {
            enabled: true,
            topic: None,
            buffer: 10_000,
            linger_ms: 100,
            max_body_excerpt_bytes: 1024,
            retention_ms: 7 * 24 * 3_600_000,
        }
    }
}

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
