//! The user-facing `[lifecycle]` section and its settings.

use std::time::Duration;

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

impl LifecycleConfig {
    /// The runtime settings.
    pub fn to_settings(&self) -> LifecycleSettings {
        LifecycleSettings {
            disable_after_failing: (self.disable_after_failing_ms > 0)
                .then(|| Duration::from_millis(self.disable_after_failing_ms)),
        }
    }
}

/// The `[lifecycle]` section, converted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LifecycleSettings {
    /// How long an endpoint may fail every attempt before it is disabled; `None`: never.
    pub disable_after_failing: Option<Duration>,
}

impl Default for LifecycleSettings {
    fn default() -> Self {
        LifecycleConfig::default().to_settings()
    }
}
