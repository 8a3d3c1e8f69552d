//! The `[lifecycle]` section: when the dispatcher disables an endpoint by itself.

use serde::{Deserialize, Serialize};

/// When the dispatcher disables an endpoint by itself. An endpoint that answers
/// `410 Gone` is disabled at once, whatever this says.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LifecycleConfig {
    /// Disable an endpoint once every attempt this dispatcher made to it failed for this
    /// long, in milliseconds (counted from the first failure since its last success, per
    /// replica). 0: never. Default 432000000 (5 days).
    pub disable_after_failing_ms: u64,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        LifecycleConfig {
            disable_after_failing_ms: 5 * 24 * 3_600_000,
        }
    }
}
