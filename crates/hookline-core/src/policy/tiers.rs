//! Retry tiers: the delayed topics `<base>.retry.<suffix>` and how a delay picks one.

use std::time::Duration;

use super::PolicyError;

/// One retry tier: a delay and the topic suffix naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tier {
    /// The tier's delay.
    pub delay: Duration,
    /// Its topic suffix, e.g. `5s`, `1m`, `200ms`, `1h`.
    pub suffix: String,
}

/// A non-empty list of tiers with distinct delays, shortest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryTiers(Vec<Tier>);

impl Default for RetryTiers {
    /// The tiers of the design: 5s, 1m, 10m, 1h.
    fn default() -> Self {
        RetryTiers(
            [5, 60, 600, 3600]
                .into_iter()
                .map(|s| {
                    let delay = Duration::from_secs(s);
                    Tier {
                        delay,
                        suffix: format_suffix(delay),
                    }
                })
                .collect(),
        )
    }
}

impl RetryTiers {
    /// Tiers for the given delays, in any order; they must be non-empty, distinct, above
    /// zero and whole milliseconds.
    pub fn new(mut delays: Vec<Duration>) -> Result<Self, PolicyError> {
        if delays.is_empty() {
            return Err(PolicyError::invalid(
                "",
                "retry_tiers",
                "needs at least one tier",
            ));
        }
        delays.sort();
        for pair in delays.windows(2) {
            if pair[0] == pair[1] {
                return Err(PolicyError::invalid(
                    "",
                    "retry_tiers",
                    format!("tier {} is listed twice", format_suffix(pair[0])),
                ));
            }
        }
        for d in &delays {
            if d.is_zero() || !d.subsec_nanos().is_multiple_of(1_000_000) {
                return Err(PolicyError::invalid(
                    "",
                    "retry_tiers",
                    format!("tier delay {d:?} must be a whole number of milliseconds above zero"),
                ));
            }
        }
        Ok(RetryTiers(
            delays
                .into_iter()
                .map(|delay| Tier {
                    delay,
                    suffix: format_suffix(delay),
                })
                .collect(),
        ))
    }

    /// The tiers a dispatcher has when its config names none.
    pub const DEFAULT_SUFFIXES: [&str; 4] = ["5s", "1m", "10m", "1h"];

    /// Tiers from suffixes such as `["5s", "1m", "10m", "1h"]`.
    pub fn from_suffixes<S: AsRef<str>>(suffixes: &[S]) -> Result<Self, PolicyError> {
        let delays = suffixes
            .iter()
            .map(|s| parse_suffix(s.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(delays)
    }

    /// The tiers, shortest first.
    pub fn tiers(&self) -> &[Tier] {
        &self.0
    }

    /// The smallest tier whose delay is at least `delay`; the largest tier if none is.
    pub fn tier_for(&self, delay: Duration) -> &Tier {
        let idx = self.0.partition_point(|t| t.delay < delay);
        &self.0[idx.min(self.0.len() - 1)]
    }

    /// The topic of `tier` for a source topic: `<base_topic>.retry.<suffix>`.
    pub fn topic(&self, base_topic: &str, tier: &Tier) -> String {
        format!("{base_topic}.retry.{}", tier.suffix)
    }

    /// Every tier topic for a source topic, shortest tier first.
    pub fn topics(&self, base_topic: &str) -> Vec<String> {
        self.0.iter().map(|t| self.topic(base_topic, t)).collect()
    }

    /// The tier whose topic for `base_topic` is `topic`, if any.
    pub fn tier_of_topic(&self, base_topic: &str, topic: &str) -> Option<&Tier> {
        let suffix = topic.strip_prefix(base_topic)?.strip_prefix(".retry.")?;
        self.0.iter().find(|t| t.suffix == suffix)
    }
}

/// The suffix naming a delay: `<n>ms` unless it is whole seconds, else `<n>h`, `<n>m` or
/// `<n>s`, whichever is exact with the largest unit (`200ms`, `1500ms`, `5s`, `90s`, `1m`, `1h`).
/// Sub-millisecond parts are dropped.
pub fn format_suffix(delay: Duration) -> String {
    let ms = delay.as_millis();
    if ms == 0 || !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// Parses a suffix written by [`format_suffix`], or any `<whole number><ms|s|m|h>`.
pub fn parse_suffix(suffix: &str) -> Result<Duration, PolicyError> {
    let invalid = |source| PolicyError::InvalidSuffix {
        suffix: suffix.to_owned(),
        source,
    };
    let split = suffix
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| invalid(None))?;
    let (digits, unit) = suffix.split_at(split);
    let factor_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(invalid(None)),
    };
    let n: u64 = digits.parse().map_err(|e| invalid(Some(e)))?;
    n.checked_mul(factor_ms)
        .map(Duration::from_millis)
        .ok_or_else(|| invalid(None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn suffixes() {
        let cases = [
            (200, "200ms"),
            (1_500, "1500ms"),
            (5_000, "5s"),
            (90_000, "90s"),
            (60_000, "1m"),
            (600_000, "10m"),
            (5_400_000, "90m"),
            (3_600_000, "1h"),
            (7_200_000, "2h"),
        ];
        for (millis, text) in cases {
            assert_eq!(format_suffix(ms(millis)), text);
            assert_eq!(parse_suffix(text).expect("parse"), ms(millis));
        }
        for bad in [
            "",
            "5",
            "s",
            "5x",
            "-5s",
            "5 s",
            "1.5s",
            "99999999999999999999s",
        ] {
            assert!(parse_suffix(bad).is_err(), "{bad}");
        }
        assert!(matches!(
            parse_suffix("99999999999999999999s"),
            Err(PolicyError::InvalidSuffix {
                source: Some(_),
                ..
            })
        ));
    }

    #[test]
    fn default_tiers_and_topics() {
        let tiers = RetryTiers::default();
        assert_eq!(
            tiers.topics("webhook-events"),
            [
                "webhook-events.retry.5s",
                "webhook-events.retry.1m",
                "webhook-events.retry.10m",
                "webhook-events.retry.1h"
            ]
        );
        assert_eq!(
            RetryTiers::from_suffixes(&["1h", "5s", "10m", "1m"]).expect("valid"),
            tiers
        );
        let tier = tiers.tier_of_topic("webhook-events", "webhook-events.retry.10m");
        assert_eq!(tier.map(|t| t.delay), Some(ms(600_000)));
        assert_eq!(
            tiers.tier_of_topic("webhook-events", "webhook-events.retry.2m"),
            None
        );
        assert_eq!(
            tiers.tier_of_topic("other", "webhook-events.retry.5s"),
            None
        );
    }

    #[test]
    fn tier_choice() {
        let tiers = RetryTiers::default();
        assert_eq!(tiers.tier_for(Duration::ZERO).suffix, "5s");
        assert_eq!(tiers.tier_for(ms(5_000)).suffix, "5s");
        assert_eq!(tiers.tier_for(ms(5_001)).suffix, "1m");
        assert_eq!(tiers.tier_for(ms(3_600_000)).suffix, "1h");
        assert_eq!(tiers.tier_for(ms(90_000_000)).suffix, "1h");
    }

    #[test]
    fn invalid_tier_lists() {
        assert!(RetryTiers::new(vec![]).is_err());
        assert!(RetryTiers::new(vec![ms(5), ms(5)]).is_err());
        assert!(RetryTiers::new(vec![Duration::ZERO]).is_err());
        assert!(RetryTiers::new(vec![Duration::from_micros(1500)]).is_err());
        assert!(RetryTiers::from_suffixes(&["5s", "5000ms"]).is_err());
    }

    proptest! {
        #[test]
        fn chosen_tier_is_never_shorter_unless_delay_exceeds_largest(
            delays in proptest::collection::btree_set(1u64..10_000_000, 1..8),
            delay in 0u64..20_000_000,
        ) {
            let tiers = RetryTiers::new(delays.iter().copied().map(ms).collect()).expect("valid");
            let largest = tiers.tiers().last().expect("non-empty").delay;
            let chosen = tiers.tier_for(ms(delay));
            if ms(delay) <= largest {
                prop_assert!(chosen.delay >= ms(delay));
                // ...and it is the smallest such tier.
                prop_assert!(tiers.tiers().iter().all(|t| t.delay < ms(delay) || t.delay >= chosen.delay));
            } else {
                prop_assert_eq!(chosen.delay, largest);
            }
        }

        #[test]
        fn suffix_round_trips(millis in 1u64..1_000_000_000_000) {
            prop_assert_eq!(parse_suffix(&format_suffix(ms(millis))).expect("parse"), ms(millis));
        }
    }
}
