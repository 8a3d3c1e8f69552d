//! Backoff strategies and the pure retry decision.

use std::time::Duration;

use rand::Rng;

use super::config::{PolicyOverride, StrategyKind};
use crate::envelope::ErrorReason;

/// How the delay before the next attempt grows; `n` is the number of attempts made minus one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// The same delay every time.
    Fixed {
        /// The delay.
        delay: Duration,
    },
    /// `base * 2^n`.
    Exponential {
        /// The first delay.
        base: Duration,
    },
    /// `base * 2^n * U(0.5, 1.5)`: exponential with proportional jitter.
    ExponentialJitter {
        /// The first delay, before jitter.
        base: Duration,
    },
    /// `U(0, min(cap, base * 2^n))`: "full jitter".
    FullJitter {
        /// The first upper bound.
        base: Duration,
    },
}

impl Strategy {
    /// The kind of strategy, without its duration.
    pub fn kind(&self) -> StrategyKind {
        match self {
            Strategy::Fixed { .. } => StrategyKind::Fixed,
            Strategy::Exponential { .. } => StrategyKind::Exponential,
            Strategy::ExponentialJitter { .. } => StrategyKind::ExponentialJitter,
            Strategy::FullJitter { .. } => StrategyKind::FullJitter,
        }
    }

    /// The base delay (the constant delay of [`Strategy::Fixed`]).
    pub fn base(&self) -> Duration {
        match *self {
            Strategy::Fixed { delay } => delay,
            Strategy::Exponential { base }
            | Strategy::ExponentialJitter { base }
            | Strategy::FullJitter { base } => base,
        }
    }
}

/// Retry policy at run time: a strategy, a cap on every delay, and limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// How delays grow.
    pub strategy: Strategy,
    /// No computed delay is longer than this.
    pub cap: Duration,
    /// Most attempts in all, the first one included (at least 1).
    pub max_attempts: u32,
    /// No attempt starts later than this after the first attempt.
    pub max_age: Option<Duration>,
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Attempt again after this delay.
    RetryIn(Duration),
    /// Give up: park the delivery in the DLQ.
    Exhausted(Exhaustion),
}

/// Why the policy gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhaustion {
    /// `max_attempts` attempts were made.
    MaxAttempts,
    /// The next attempt would start after `max_age`.
    MaxAge,
}

impl Exhaustion {
    /// The DLQ reason for a delivery given up for this cause.
    pub fn reason(self) -> ErrorReason {
        match self {
            Exhaustion::MaxAttempts => ErrorReason::RetriesExhausted,
            Exhaustion::MaxAge => ErrorReason::MaxAgeExceeded,
        }
    }
}

/// `min(cap, base * 2^n)`, without overflow for any `n`.
fn exponential(base: Duration, n: u32, cap: Duration) -> Duration {
    if base.is_zero() {
        return Duration::ZERO;
    }
    2u32.checked_pow(n)
        .and_then(|factor| base.checked_mul(factor))
        .map_or(cap, |d| d.min(cap))
}

/// A uniformly random duration in `[0, upper]`.
fn uniform_up_to(upper: Duration, rng: &mut impl Rng) -> Duration {
    match u64::try_from(upper.as_nanos()) {
        Ok(nanos) => Duration::from_nanos(rng.random_range(0..=nanos)),
        Err(_) => upper.mul_f64(rng.random::<f64>()).min(upper),
    }
}

impl RetryPolicy {
    /// The delay after `attempt` attempts were made (`attempt >= 1`; 0 counts as 1),
    /// always within `[0, cap]`.
    pub fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let n = attempt.saturating_sub(1);
        let cap = self.cap;
        match self.strategy {
            Strategy::Fixed { delay } => delay.min(cap),
            Strategy::Exponential { base } => exponential(base, n, cap),
            Strategy::ExponentialJitter { base } => {
                let exp = exponential(base, n, cap);
                let factor: f64 = rng.random_range(0.5..1.5);
                Duration::try_from_secs_f64(exp.as_secs_f64() * factor).map_or(cap, |d| d.min(cap))
            }
            Strategy::FullJitter { base } => uniform_up_to(exponential(base, n, cap), rng),
        }
    }

    /// Decides what follows a failed attempt, `attempts_made` (>= 1) attempts in.
    ///
    /// Gives up after `max_attempts` attempts. Otherwise waits the computed delay, or the
    /// endpoint's `retry_after` when that is longer (the cap does not shorten a
    /// Retry-After). With a `max_age`, a computed delay is shortened so the last attempt
    /// starts at the deadline, while a Retry-After reaching past the deadline gives up.
    pub fn decide(
        &self,
        attempts_made: u32,
        first_attempt_at_ms: i64,
        now_ms: i64,
        retry_after: Option<Duration>,
        rng: &mut impl Rng,
    ) -> RetryDecision {
        if attempts_made >= self.max_attempts {
            return RetryDecision::Exhausted(Exhaustion::MaxAttempts);
        }
        let mut computed = self.delay(attempts_made, rng);
        if let Some(max_age) = self.max_age {
            let age_ms = u64::try_from(now_ms.saturating_sub(first_attempt_at_ms)).unwrap_or(0);
            let Some(remaining) = max_age.checked_sub(Duration::from_millis(age_ms)) else {
                return RetryDecision::Exhausted(Exhaustion::MaxAge);
            };
            if remaining.is_zero() || retry_after.is_some_and(|ra| ra > remaining) {
                return RetryDecision::Exhausted(Exhaustion::MaxAge);
            }
            computed = computed.min(remaining);
        }
        RetryDecision::RetryIn(retry_after.map_or(computed, |ra| ra.max(computed)))
    }

    /// This policy with the fields an endpoint overrides replaced. A `base_ms` without a
    /// `strategy` keeps the strategy and changes its base; `max_attempts` is at least 1.
    pub fn with_override(&self, o: &PolicyOverride) -> RetryPolicy {
        let kind = o.strategy.unwrap_or(self.strategy.kind());
        let base = o
            .base_ms
            .map_or(self.strategy.base(), Duration::from_millis);
        RetryPolicy {
            strategy: kind.with_base(base),
            cap: o.cap_ms.map_or(self.cap, Duration::from_millis),
            max_attempts: o.max_attempts.unwrap_or(self.max_attempts).max(1),
            max_age: o.max_age_ms.map(Duration::from_millis).or(self.max_age),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{Strategy as _, any, prop_assert, proptest};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn policy(strategy: Strategy, cap_ms: u64) -> RetryPolicy {
        RetryPolicy {
            strategy,
            cap: Duration::from_millis(cap_ms),
            max_attempts: 5,
            max_age: None,
        }
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn exponential_doubles_until_the_cap() {
        let p = policy(Strategy::Exponential { base: ms(500) }, 3_000);
        let mut rng = StdRng::seed_from_u64(1);
        let got: Vec<u64> = (1..=6)
            .map(|a| p.delay(a, &mut rng).as_millis() as u64)
            .collect();
        assert_eq!(got, [500, 1000, 2000, 3000, 3000, 3000]);
        assert_eq!(p.delay(0, &mut rng), ms(500));
        assert_eq!(p.delay(u32::MAX, &mut rng), ms(3_000));
    }

    #[test]
    fn fixed_is_capped() {
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(
            policy(Strategy::Fixed { delay: ms(700) }, 500).delay(3, &mut rng),
            ms(500)
        );
        assert_eq!(
            policy(Strategy::Fixed { delay: ms(300) }, 500).delay(3, &mut rng),
            ms(300)
        );
    }

    #[test]
    fn huge_durations_do_not_overflow() {
        let mut rng = StdRng::seed_from_u64(7);
        for strategy in [
            Strategy::Exponential {
                base: Duration::MAX,
            },
            Strategy::ExponentialJitter {
                base: Duration::MAX,
            },
            Strategy::FullJitter {
                base: Duration::MAX,
            },
        ] {
            let p = RetryPolicy {
                strategy,
                cap: Duration::MAX,
                max_attempts: 3,
                max_age: None,
            };
            for attempt in [1, 2, 64, u32::MAX] {
                assert!(p.delay(attempt, &mut rng) <= Duration::MAX);
            }
        }
    }

    #[test]
    fn decide_limits_attempts() {
        let p = policy(Strategy::Fixed { delay: ms(100) }, 1_000);
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(
            p.decide(4, 0, 0, None, &mut rng),
            RetryDecision::RetryIn(ms(100))
        );
        assert_eq!(
            p.decide(5, 0, 0, None, &mut rng),
            RetryDecision::Exhausted(Exhaustion::MaxAttempts)
        );
        assert_eq!(
            Exhaustion::MaxAttempts.reason(),
            ErrorReason::RetriesExhausted
        );
        assert_eq!(Exhaustion::MaxAge.reason(), ErrorReason::MaxAgeExceeded);
    }

    #[test]
    fn retry_after_raises_but_never_lowers_and_is_not_capped() {
        let p = policy(Strategy::Fixed { delay: ms(100) }, 1_000);
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(
            p.decide(1, 0, 0, Some(ms(50)), &mut rng),
            RetryDecision::RetryIn(ms(100))
        );
        assert_eq!(
            p.decide(1, 0, 0, Some(ms(60_000)), &mut rng),
            RetryDecision::RetryIn(ms(60_000))
        );
    }

    #[test]
    fn max_age_shortens_computed_delays_and_refuses_long_retry_after() {
        let p = RetryPolicy {
            max_age: Some(ms(10_000)),
            ..policy(Strategy::Fixed { delay: ms(5_000) }, 60_000)
        };
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(
            p.decide(1, 1_000, 2_000, None, &mut rng),
            RetryDecision::RetryIn(ms(5_000))
        );
        assert_eq!(
            p.decide(2, 1_000, 8_000, None, &mut rng),
            RetryDecision::RetryIn(ms(3_000))
        );
        assert_eq!(
            p.decide(2, 1_000, 8_000, Some(ms(3_001)), &mut rng),
            RetryDecision::Exhausted(Exhaustion::MaxAge)
        );
        assert_eq!(
            p.decide(3, 1_000, 11_000, None, &mut rng),
            RetryDecision::Exhausted(Exhaustion::MaxAge)
        );
        assert_eq!(
            p.decide(3, 1_000, 20_000, None, &mut rng),
            RetryDecision::Exhausted(Exhaustion::MaxAge)
        );
        // A clock that went backwards counts as age zero.
        assert_eq!(
            p.decide(1, 5_000, 0, None, &mut rng),
            RetryDecision::RetryIn(ms(5_000))
        );
    }

    #[test]
    fn overrides_replace_only_given_fields() {
        let p = RetryPolicy {
            strategy: Strategy::ExponentialJitter { base: ms(500) },
            cap: ms(60_000),
            max_attempts: 8,
            max_age: Some(ms(1_000_000)),
        };
        assert_eq!(p.with_override(&PolicyOverride::default()), p);
        let o = PolicyOverride {
            strategy: Some(StrategyKind::Fixed),
            base_ms: None,
            cap_ms: Some(10_000),
            max_attempts: Some(3),
            max_age_ms: None,
        };
        let q = p.with_override(&o);
        assert_eq!(q.strategy, Strategy::Fixed { delay: ms(500) });
        assert_eq!(
            (q.cap, q.max_attempts, q.max_age),
            (ms(10_000), 3, p.max_age)
        );
        let base_only = PolicyOverride {
            base_ms: Some(2_000),
            max_attempts: Some(0),
            ..PolicyOverride::default()
        };
        let r = p.with_override(&base_only);
        assert_eq!(r.strategy, Strategy::ExponentialJitter { base: ms(2_000) });
        assert_eq!(r.max_attempts, 1);
    }

    fn any_strategy() -> impl proptest::strategy::Strategy<Value = super::Strategy> {
        (0u64..10_000_000, 0usize..4).prop_map(|(base_ms, kind)| {
            let base = Duration::from_millis(base_ms);
            match kind {
                0 => Strategy::Fixed { delay: base },
                1 => Strategy::Exponential { base },
                2 => Strategy::ExponentialJitter { base },
                _ => Strategy::FullJitter { base },
            }
        })
    }

    proptest! {
        #[test]
        fn every_delay_is_within_zero_and_cap(
            strategy in any_strategy(),
            cap_ms in 0u64..100_000_000,
            attempt in any::<u32>(),
            seed in any::<u64>(),
        ) {
            let p = policy(strategy, cap_ms);
            let d = p.delay(attempt, &mut StdRng::seed_from_u64(seed));
            prop_assert!(d <= p.cap, "{d:?} > {:?}", p.cap);
        }

        #[test]
        fn exponential_is_monotone_until_cap(
            base_ms in 1u64..100_000,
            cap_ms in 1u64..100_000_000,
            attempt in 1u32..80,
        ) {
            let p = policy(Strategy::Exponential { base: ms(base_ms) }, cap_ms);
            let mut rng = StdRng::seed_from_u64(0);
            let (a, b) = (p.delay(attempt, &mut rng), p.delay(attempt + 1, &mut rng));
            prop_assert!(a <= b);
            prop_assert!(b == p.cap || b == a * 2);
        }

        #[test]
        fn jitter_bounds(
            base_ms in 1u64..100_000,
            cap_ms in 1u64..100_000_000,
            attempt in 1u32..80,
            seed in any::<u64>(),
        ) {
            let cap = ms(cap_ms);
            let exp = policy(Strategy::Exponential { base: ms(base_ms) }, cap_ms)
                .delay(attempt, &mut StdRng::seed_from_u64(0));
            let mut rng = StdRng::seed_from_u64(seed);
            let prop = policy(Strategy::ExponentialJitter { base: ms(base_ms) }, cap_ms)
                .delay(attempt, &mut rng);
            prop_assert!(prop >= exp.mul_f64(0.5).saturating_sub(Duration::from_nanos(1)));
            prop_assert!(prop <= exp.mul_f64(1.5).min(cap));
            let full = policy(Strategy::FullJitter { base: ms(base_ms) }, cap_ms)
                .delay(attempt, &mut rng);
            prop_assert!(full <= exp);
        }

        #[test]
        fn decisions_respect_limits(
            strategy in any_strategy(),
            attempts in 1u32..20,
            age_ms in 0i64..200_000,
            max_age_ms in 1u64..200_000,
            retry_after_ms in proptest::option::of(0u64..300_000),
            seed in any::<u64>(),
        ) {
            let p = RetryPolicy {
                strategy,
                cap: ms(100_000),
                max_attempts: 10,
                max_age: Some(ms(max_age_ms)),
            };
            let ra = retry_after_ms.map(ms);
            match p.decide(attempts, 0, age_ms, ra, &mut StdRng::seed_from_u64(seed)) {
                RetryDecision::RetryIn(d) => {
                    prop_assert!(attempts < 10);
                    prop_assert!(ms(age_ms as u64) + d <= ms(max_age_ms));
                    if let Some(ra) = ra {
                        prop_assert!(d >= ra);
                    }
                }
                RetryDecision::Exhausted(Exhaustion::MaxAttempts) => prop_assert!(attempts >= 10),
                RetryDecision::Exhausted(Exhaustion::MaxAge) => {
                    let age = ms(age_ms as u64);
                    prop_assert!(age >= ms(max_age_ms) || ra.is_some_and(|ra| age + ra > ms(max_age_ms)));
                }
            }
        }
    }
}
