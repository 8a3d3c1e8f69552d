//! The `[attempts]` section: the attempt log as the user configures it.

use serde::{Deserialize, Serialize};

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
