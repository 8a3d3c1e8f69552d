//! The `[lifecycle]` section's settings.

use std::time::Duration;

use crate::config::LifecycleConfig;

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
