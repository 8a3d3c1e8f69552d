//! The `[cancellations]` section: how `hookline events cancel` is honoured.

use serde::{Deserialize, Serialize};

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
