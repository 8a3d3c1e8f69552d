//! The retry policy: backoff strategies, the retry decision and the retry tiers.

mod config;
mod strategy;
mod tiers;

pub use config::{PolicyOverride, RetryConfig, StrategyKind};
pub use strategy::{Exhaustion, RetryDecision, RetryPolicy, Strategy};
pub use tiers::{RetryTiers, Tier, format_suffix, parse_suffix};

/// A retry policy, override or tier list that cannot be used, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A config field has a value out of range.
    #[error("invalid `{field}`: {reason}")]
    Invalid {
        /// The field, with its path, e.g. `retry.base_ms`.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// A retry tier suffix is not `<whole number><ms|s|m|h>`.
    #[error(
        "invalid retry tier suffix `{suffix}`: expected a whole number followed by ms, s, m or h, e.g. 5s"
    )]
    InvalidSuffix {
        /// The suffix as given.
        suffix: String,
        /// The number that did not parse, if that was the problem.
        #[source]
        source: Option<std::num::ParseIntError>,
    },
}

impl PolicyError {
    pub(crate) fn invalid(prefix: &str, field: &str, reason: impl Into<String>) -> Self {
        let field = if prefix.is_empty() {
            field.to_owned()
        } else {
            format!("{prefix}.{field}")
        };
        PolicyError::Invalid {
            field,
            reason: reason.into(),
        }
    }
}
