//! The user-facing config of token logins' limits (`[console.login]`), and its validated
//! settings.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{ConsoleError, Result};

/// The most token checks `max_concurrent` may allow at once (each holds ~19 MiB).
pub const MAX_CONCURRENT_LOGINS: usize = 64;
/// The most failed logins `max_failures` may allow from one address.
pub const MAX_FAILURES: u32 = 1_000;

/// How token logins are limited. Every field has a default; embed it in the console's
/// config as `[console.login]`:
///
/// ```toml
/// [console.login]
/// max_concurrent = 2
/// max_failures = 5
/// lockout_ms = 300000
/// ```
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LoginConfig {
    /// Token checks run at once (each an argon2 check of ~19 MiB on a blocking thread); a
    /// login beyond them is refused at once with 503 and `Retry-After`, never queued. 1 to
    /// 64, default 2.
    pub max_concurrent: usize,
    /// Failed logins from one client address (for IPv6, its /64) before that address is
    /// refused with 429 and `Retry-After` for `lockout_ms`. 1 to 1000, default 5. Behind a
    /// reverse proxy every login comes from the proxy's address.
    pub max_failures: u32,
    /// How long an address is refused after `max_failures`, in milliseconds; failures
    /// older than this are forgotten. Default 300000 (5 minutes).
    pub lockout_ms: u64,
}

impl Default for LoginConfig {
    fn default() -> Self {
        LoginConfig {
            max_concurrent: 2,
            max_failures: 5,
            lockout_ms: 300_000,
        }
    }
}

/// [`LoginConfig`] validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginLimits {
    /// Token checks at once.
    pub max_concurrent: usize,
    /// Failed logins from one address before it is refused.
    pub max_failures: u32,
    /// How long it is refused then, and how long failures are remembered.
    pub lockout: Duration,
}

impl LoginConfig {
    /// Validates the section; the error names the field (`console.login.<field>`).
    pub fn to_limits(&self) -> Result<LoginLimits> {
        if !(1..=MAX_CONCURRENT_LOGINS).contains(&self.max_concurrent) {
            return Err(ConsoleError::config(
                "console.login.max_concurrent",
                format!("must be 1 to {MAX_CONCURRENT_LOGINS}"),
            ));
        }
        if !(1..=MAX_FAILURES).contains(&self.max_failures) {
            return Err(ConsoleError::config(
                "console.login.max_failures",
                format!("must be 1 to {MAX_FAILURES}"),
            ));
        }
        if self.lockout_ms == 0 {
            return Err(ConsoleError::config(
                "console.login.lockout_ms",
                "must be more than 0",
            ));
        }
        Ok(LoginLimits {
            max_concurrent: self.max_concurrent,
            max_failures: self.max_failures,
            lockout: Duration::from_millis(self.lockout_ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(config: LoginConfig) -> String {
        match config.to_limits() {
            Err(ConsoleError::Config { field, .. }) => field,
            other => panic!("not a config error: {other:?}"),
        }
    }

    #[test]
    fn the_defaults_are_two_checks_and_five_failures_per_five_minutes() {
        assert_eq!(
            LoginConfig::default().to_limits().expect("valid"),
            LoginLimits {
                max_concurrent: 2,
                max_failures: 5,
                lockout: Duration::from_secs(300),
            }
        );
    }

    #[test]
    fn limits_out_of_range_are_refused_by_name() {
        let base = LoginConfig::default();
        for (config, field) in [
            (
                LoginConfig {
                    max_concurrent: 0,
                    ..base.clone()
                },
                "console.login.max_concurrent",
            ),
            (
                LoginConfig {
                    max_concurrent: MAX_CONCURRENT_LOGINS + 1,
                    ..base.clone()
                },
                "console.login.max_concurrent",
            ),
            (
                LoginConfig {
                    max_failures: 0,
                    ..base.clone()
                },
                "console.login.max_failures",
            ),
            (
                LoginConfig {
                    lockout_ms: 0,
                    ..base.clone()
                },
                "console.login.lockout_ms",
            ),
        ] {
            assert_eq!(field_of(config), field);
        }
    }
}
