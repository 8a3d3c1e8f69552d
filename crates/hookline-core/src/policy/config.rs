//! The user-facing retry config (durations in milliseconds) and per-endpoint overrides.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::PolicyError;
use super::strategy::{RetryPolicy, Strategy};

/// Backoff strategy names as written in config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StrategyKind {
    /// `fixed`: the same delay every time.
    Fixed,
    /// `exponential`: `base * 2^n`.
    Exponential,
    /// `exponential_jitter`: `base * 2^n * U(0.5, 1.5)`.
    ExponentialJitter,
    /// `full_jitter`: `U(0, min(cap, base * 2^n))`.
    FullJitter,
}

impl StrategyKind {
    /// The strategy of this kind with the given base (the constant delay for `fixed`).
    pub fn with_base(self, base: Duration) -> Strategy {
        match self {
            StrategyKind::Fixed => Strategy::Fixed { delay: base },
            StrategyKind::Exponential => Strategy::Exponential { base },
            StrategyKind::ExponentialJitter => Strategy::ExponentialJitter { base },
            StrategyKind::FullJitter => Strategy::FullJitter { base },
        }
    }

    /// The config name, e.g. `exponential_jitter`.
    pub fn as_str(self) -> &'static str {
        match self {
            StrategyKind::Fixed => "fixed",
            StrategyKind::Exponential => "exponential",
            StrategyKind::ExponentialJitter => "exponential_jitter",
            StrategyKind::FullJitter => "full_jitter",
        }
    }
}

/// The retry policy as configured, e.g.
/// `{"strategy":"exponential_jitter","base_ms":5000,"cap_ms":3600000,"max_attempts":15,"max_age_ms":86400000}`.
/// Every field is optional; see [`RetryConfig::default`] for the defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Backoff strategy. Default `exponential_jitter`.
    pub strategy: StrategyKind,
    /// First delay in milliseconds (the constant delay for `fixed`), at least 1. Default 5000.
    pub base_ms: u64,
    /// Longest computed delay in milliseconds, at least `base_ms`. Default 3600000 (1 h).
    pub cap_ms: u64,
    /// Most attempts in all, the first included, at least 1. Default 15.
    pub max_attempts: u32,
    /// Latest start of an attempt, in milliseconds after the first attempt; `null` for no
    /// limit. Default 86400000 (24 h).
    pub max_age_ms: Option<u64>,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            strategy: StrategyKind::ExponentialJitter,
            base_ms: 5_000,
            cap_ms: 3_600_000,
            max_attempts: 15,
            max_age_ms: Some(86_400_000),
        }
    }
}

impl RetryConfig {
    /// Validates the config and converts it, naming fields as `retry.<field>`.
    pub fn to_policy(&self) -> Result<RetryPolicy, PolicyError> {
        self.to_policy_at("retry")
    }

    /// Validates the config and converts it, naming fields as `<prefix>.<field>`.
    pub fn to_policy_at(&self, prefix: &str) -> Result<RetryPolicy, PolicyError> {
        positive(prefix, "base_ms", Some(self.base_ms))?;
        positive(prefix, "cap_ms", Some(self.cap_ms))?;
        if self.cap_ms < self.base_ms {
            return Err(PolicyError::invalid(
                prefix,
                "cap_ms",
                format!("must be at least base_ms ({})", self.base_ms),
            ));
        }
        positive(prefix, "max_attempts", Some(u64::from(self.max_attempts)))?;
        positive(prefix, "max_age_ms", self.max_age_ms)?;
        Ok(RetryPolicy {
            strategy: self.strategy.with_base(Duration::from_millis(self.base_ms)),
            cap: Duration::from_millis(self.cap_ms),
            max_attempts: self.max_attempts,
            max_age: self.max_age_ms.map(Duration::from_millis),
        })
    }
}

impl TryFrom<&RetryConfig> for RetryPolicy {
    type Error = PolicyError;

    fn try_from(config: &RetryConfig) -> Result<Self, Self::Error> {
        config.to_policy()
    }
}

/// Per-endpoint changes to the dispatcher's retry policy (the `retry` field of an endpoint
/// config); a field left out keeps the dispatcher's value. See [`RetryPolicy::with_override`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyOverride {
    /// Backoff strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<StrategyKind>,
    /// First delay in milliseconds (the constant delay for `fixed`), at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_ms: Option<u64>,
    /// Longest computed delay in milliseconds, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap_ms: Option<u64>,
    /// Most attempts in all, the first included, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Latest start of an attempt, in milliseconds after the first attempt, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_ms: Option<u64>,
}

impl PolicyOverride {
    /// Checks the given fields, naming them as `<prefix>.<field>` (e.g. prefix `retry`).
    pub fn validate(&self, prefix: &str) -> Result<(), PolicyError> {
        positive(prefix, "base_ms", self.base_ms)?;
        positive(prefix, "cap_ms", self.cap_ms)?;
        positive(prefix, "max_attempts", self.max_attempts.map(u64::from))?;
        positive(prefix, "max_age_ms", self.max_age_ms)?;
        if let (Some(base), Some(cap)) = (self.base_ms, self.cap_ms)
            && cap < base
        {
            return Err(PolicyError::invalid(
                prefix,
                "cap_ms",
                format!("must be at least base_ms ({base})"),
            ));
        }
        Ok(())
    }
}

fn positive(prefix: &str, field: &str, value: Option<u64>) -> Result<(), PolicyError> {
    match value {
        Some(0) => Err(PolicyError::invalid(prefix, field, "must be at least 1")),
        Some(_) | None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let json = r#"{"strategy":"exponential_jitter","base_ms":500,"cap_ms":3600000,"max_attempts":8,"max_age_ms":86400000}"#;
        let config: RetryConfig = serde_json::from_str(json).expect("parse");
        let policy = config.to_policy().expect("valid");
        assert_eq!(
            policy.strategy,
            Strategy::ExponentialJitter {
                base: Duration::from_millis(500)
            }
        );
        assert_eq!(policy.cap, Duration::from_secs(3600));
        assert_eq!(policy.max_attempts, 8);
        assert_eq!(policy.max_age, Some(Duration::from_secs(86_400)));
    }

    #[test]
    fn defaults_fill_missing_fields_and_null_disables_max_age() {
        let config: RetryConfig = serde_json::from_str(r#"{"strategy":"fixed"}"#).expect("parse");
        assert_eq!(config.base_ms, RetryConfig::default().base_ms);
        let config: RetryConfig = serde_json::from_str(r#"{"max_age_ms":null}"#).expect("parse");
        assert_eq!(config.to_policy().expect("valid").max_age, None);
        RetryConfig::default()
            .to_policy()
            .expect("defaults are valid");
    }

    #[test]
    fn unknown_fields_and_strategies_are_refused() {
        assert!(serde_json::from_str::<RetryConfig>(r#"{"base":5}"#).is_err());
        assert!(serde_json::from_str::<RetryConfig>(r#"{"strategy":"linear"}"#).is_err());
        assert!(serde_json::from_str::<PolicyOverride>(r#"{"cap":5}"#).is_err());
    }

    #[test]
    fn validation_names_the_field() {
        let field_of = |c: RetryConfig| match c.to_policy() {
            Err(PolicyError::Invalid { field, .. }) => field,
            other => panic!("expected Invalid, got {other:?}"),
        };
        let d = RetryConfig::default;
        assert_eq!(field_of(RetryConfig { base_ms: 0, ..d() }), "retry.base_ms");
        assert_eq!(field_of(RetryConfig { cap_ms: 1, ..d() }), "retry.cap_ms");
        assert_eq!(
            field_of(RetryConfig {
                max_attempts: 0,
                ..d()
            }),
            "retry.max_attempts"
        );
        assert_eq!(
            field_of(RetryConfig {
                max_age_ms: Some(0),
                ..d()
            }),
            "retry.max_age_ms"
        );
        let err = RetryConfig { base_ms: 0, ..d() }
            .to_policy_at("endpoints.ep_1.retry")
            .expect_err("invalid");
        assert_eq!(
            err.to_string(),
            "invalid `endpoints.ep_1.retry.base_ms`: must be at least 1"
        );
    }

    #[test]
    fn override_validation() {
        let o: PolicyOverride =
            serde_json::from_str(r#"{"strategy":"full_jitter","max_attempts":3}"#).expect("parse");
        o.validate("retry").expect("valid");
        let bad = PolicyOverride {
            base_ms: Some(10),
            cap_ms: Some(5),
            ..PolicyOverride::default()
        };
        assert!(
            matches!(bad.validate("retry"), Err(PolicyError::Invalid { field, .. }) if field == "retry.cap_ms")
        );
        let zero = PolicyOverride {
            max_attempts: Some(0),
            ..PolicyOverride::default()
        };
        assert!(zero.validate("retry").is_err());
    }

    #[test]
    fn kinds_round_trip_through_serde() {
        for kind in [
            StrategyKind::Fixed,
            StrategyKind::Exponential,
            StrategyKind::ExponentialJitter,
            StrategyKind::FullJitter,
        ] {
            let json = serde_json::to_string(&kind).expect("serialize");
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert_eq!(kind.with_base(Duration::from_secs(1)).kind(), kind);
        }
    }
}
