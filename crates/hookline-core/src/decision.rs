//! The decision after an attempt, a deferral or a tier take-up: pure functions from a
//! delivery's retry state, its endpoint's policy, what happened, the time and the retry tiers
//! to what the dispatcher does next. No I/O: the dispatcher carries the decision out.
//!
//! The one rule that keeps shared tier partitions moving: a record never sits in a tier
//! longer than that tier's delay. A wait longer than the largest tier (a Retry-After of a
//! day) is split into hops: the record is taken up at the tier's delay and written again
//! for the rest, without an attempt.

use std::time::Duration;

use rand::Rng;

use crate::classify::Classification;
use crate::envelope::ErrorReason;
use crate::policy::{RetryDecision, RetryPolicy, RetryTiers, Tier};

/// Records due this close to now are taken up rather than paused for, in milliseconds.
pub const DUE_SLACK_MS: i64 = 5;

/// Where a delivery stands in its retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryState {
    /// Attempts made so far, the one just made included.
    pub attempts_made: u32,
    /// Where the delivery's age counts from (its first attempt, or the event's creation
    /// when that is earlier and known), epoch milliseconds.
    pub age_origin_ms: i64,
}

/// A record's place in a retry tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The tier it is written to.
    pub tier: Tier,
    /// When the tier consumer takes it up: never later than the write time plus the tier's
    /// delay. Travels as `hookline-due-at`.
    pub due_at_ms: i64,
    /// When the next attempt may start, when that is later than `due_at_ms` (the take-up
    /// then hops again). Travels as `hookline-retry-at`.
    pub retry_at_ms: Option<i64>,
}

/// What the dispatcher does after an attempt or a deferral.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The endpoint has it.
    Delivered,
    /// Another attempt later, through a tier.
    Retry(Schedule),
    /// Never again: park it in the DLQ with this reason.
    Park(ErrorReason),
}

/// What a tier consumer does with the record it just fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeUp {
    /// Attempt it now.
    Now,
    /// Not due: pause the partition until this time (epoch ms) and fetch it again then.
    PauseUntil(i64),
    /// Its tier time is up but its attempt is not due yet: write it again (no attempt).
    Hop(Schedule),
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Places a wait of `wait` from `now_ms` in the smallest tier that holds it; a longer wait
/// than the largest tier is clamped to it and the rest is carried in `retry_at_ms`.
pub fn schedule(tiers: &RetryTiers, now_ms: i64, wait: Duration) -> Schedule {
    let tier = tiers.tier_for(wait).clone();
    let wait_ms = millis(wait);
    let tier_ms = millis(tier.delay);
    if wait_ms <= tier_ms {
        Schedule {
            tier,
            due_at_ms: now_ms.saturating_add(wait_ms),
            retry_at_ms: None,
        }
    } else {
        Schedule {
            tier,
            due_at_ms: now_ms.saturating_add(tier_ms),
            retry_at_ms: Some(now_ms.saturating_add(wait_ms)),
        }
    }
}

/// The decision after an attempt that `classification` judged.
pub fn after_attempt(
    state: RetryState,
    policy: &RetryPolicy,
    classification: &Classification,
    now_ms: i64,
    tiers: &RetryTiers,
    rng: &mut impl Rng,
) -> Decision {
    match classification {
        Classification::Success => Decision::Delivered,
        Classification::NonRetryable { .. } => match classification.dlq_reason() {
            Some(reason) => Decision::Park(reason),
            None => Decision::Park(ErrorReason::NonRetryableStatus),
        },
        Classification::Retryable { retry_after, .. } => {
            let retry = policy.decide(
                state.attempts_made,
                state.age_origin_ms,
                now_ms,
                *retry_after,
                rng,
            );
            match retry {
                RetryDecision::RetryIn(delay) => Decision::Retry(schedule(tiers, now_ms, delay)),
                RetryDecision::Exhausted(exhaustion) => Decision::Park(exhaustion.reason()),
            }
        }
    }
}

/// The decision for a record deferred without an attempt (its endpoint's breaker is open,
/// its queue is full, it held its partition's commit too long): it costs no attempt and
/// waits `wait` (the breaker's remaining open time, or the first tier), never more, so
/// repeated deferrals do not climb the tiers. Past the policy's maximum age it is parked.
pub fn deferral(
    age_origin_ms: Option<i64>,
    policy: &RetryPolicy,
    wait: Duration,
    now_ms: i64,
    tiers: &RetryTiers,
) -> Decision {
    if let (Some(max_age), Some(origin)) = (policy.max_age, age_origin_ms)
        && now_ms.saturating_sub(origin) > millis(max_age)
    {
        return Decision::Park(ErrorReason::MaxAgeExceeded);
    }
    Decision::Retry(schedule(tiers, now_ms, wait))
}

/// What to do with a record fetched from a tier whose delay is `tier_delay`, carrying
/// `due_at_ms` and maybe `retry_at_ms`, `now_ms`. A due time further away than the tier's
/// delay (written by an older version, or forged) is not waited for beyond that delay.
pub fn take_up(
    tiers: &RetryTiers,
    tier_delay: Duration,
    due_at_ms: Option<i64>,
    retry_at_ms: Option<i64>,
    now_ms: i64,
) -> TakeUp {
    let latest = now_ms.saturating_add(millis(tier_delay));
    if let Some(due) = due_at_ms
        && due.saturating_sub(now_ms) > DUE_SLACK_MS
    {
        return TakeUp::PauseUntil(due.min(latest));
    }
    match retry_at_ms {
        Some(retry_at) if retry_at.saturating_sub(now_ms) > DUE_SLACK_MS => {
            let rest = u64::try_from(retry_at.saturating_sub(now_ms)).unwrap_or(0);
            TakeUp::Hop(schedule(tiers, now_ms, Duration::from_millis(rest)))
        }
        Some(_) | None => TakeUp::Now,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proptest::strategy::Strategy as _;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;
    use crate::classify::FailureKind;
    use crate::policy::Strategy;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn tiers() -> RetryTiers {
        RetryTiers::default()
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            strategy: Strategy::Exponential { base: ms(5_000) },
            cap: ms(3_600_000),
            max_attempts: 5,
            max_age: Some(ms(86_400_000)),
        }
    }

    fn retryable(retry_after: Option<Duration>) -> Classification {
        Classification::Retryable {
            reason: FailureKind::ServerError { status: 503 },
            retry_after,
        }
    }

    const NOW: i64 = 1_700_000_000_000;

    #[test]
    fn success_delivers_and_a_final_status_parks() {
        let mut rng = StdRng::seed_from_u64(1);
        let state = RetryState {
            attempts_made: 1,
            age_origin_ms: NOW,
        };
        let p = policy();
        let decide =
            |c: &Classification, rng: &mut StdRng| after_attempt(state, &p, c, NOW, &tiers(), rng);
        assert_eq!(
            decide(&Classification::Success, &mut rng),
            Decision::Delivered
        );
        let gone = Classification::NonRetryable {
            reason: FailureKind::ClientError { status: 410 },
        };
        assert_eq!(
            decide(&gone, &mut rng),
            Decision::Park(ErrorReason::NonRetryableStatus)
        );
    }

    #[test]
    fn retries_go_to_the_smallest_tier_that_holds_the_delay() {
        let mut rng = StdRng::seed_from_u64(1);
        let state = RetryState {
            attempts_made: 2,
            age_origin_ms: NOW,
        };
        let decision = after_attempt(state, &policy(), &retryable(None), NOW, &tiers(), &mut rng);
        // 5 s * 2^1 = 10 s: the 1m tier, due in 10 s.
        let Decision::Retry(schedule) = decision else {
            panic!("a retry: {decision:?}");
        };
        assert_eq!(schedule.tier.suffix, "1m");
        assert_eq!(schedule.due_at_ms, NOW + 10_000);
        assert_eq!(schedule.retry_at_ms, None);
    }

    #[test]
    fn exhaustion_parks_with_its_reason() {
        let mut rng = StdRng::seed_from_u64(1);
        let last = RetryState {
            attempts_made: 5,
            age_origin_ms: NOW,
        };
        assert_eq!(
            after_attempt(last, &policy(), &retryable(None), NOW, &tiers(), &mut rng),
            Decision::Park(ErrorReason::RetriesExhausted)
        );
        let old = RetryState {
            attempts_made: 1,
            age_origin_ms: NOW - 86_400_001,
        };
        assert_eq!(
            after_attempt(old, &policy(), &retryable(None), NOW, &tiers(), &mut rng),
            Decision::Park(ErrorReason::MaxAgeExceeded)
        );
    }

    #[test]
    fn a_retry_after_longer_than_the_largest_tier_is_clamped_and_hops() {
        let mut rng = StdRng::seed_from_u64(1);
        let state = RetryState {
            attempts_made: 1,
            age_origin_ms: NOW,
        };
        // Retry-After: 80000 s (22 h) from an endpoint.
        let decision = after_attempt(
            state,
            &policy(),
            &retryable(Some(Duration::from_secs(80_000))),
            NOW,
            &tiers(),
            &mut rng,
        );
        let Decision::Retry(first) = decision else {
            panic!("a retry: {decision:?}");
        };
        assert_eq!(first.tier.suffix, "1h");
        assert_eq!(
            first.due_at_ms,
            NOW + 3_600_000,
            "never longer than the tier"
        );
        assert_eq!(first.retry_at_ms, Some(NOW + 80_000_000));
        // Taken up an hour later: not due, so it hops, again at most an hour.
        let later = first.due_at_ms;
        let hop = take_up(
            &tiers(),
            ms(3_600_000),
            Some(first.due_at_ms),
            first.retry_at_ms,
            later,
        );
        let TakeUp::Hop(second) = hop else {
            panic!("a hop: {hop:?}");
        };
        assert_eq!(second.due_at_ms, later + 3_600_000);
        assert_eq!(second.retry_at_ms, Some(NOW + 80_000_000));
        // The last hop lands exactly on the asked time, in the tier that holds the rest.
        let near = NOW + 80_000_000 - 30_000;
        let TakeUp::Hop(last) =
            take_up(&tiers(), ms(3_600_000), None, Some(NOW + 80_000_000), near)
        else {
            panic!("a hop");
        };
        assert_eq!(last.tier.suffix, "1m");
        assert_eq!(last.due_at_ms, NOW + 80_000_000);
        assert_eq!(last.retry_at_ms, None);
    }

    #[test]
    fn a_forged_due_time_is_not_waited_for_beyond_the_tier() {
        assert_eq!(
            take_up(&tiers(), ms(5_000), Some(i64::MAX), None, NOW),
            TakeUp::PauseUntil(NOW + 5_000)
        );
        assert_eq!(
            take_up(&tiers(), ms(5_000), Some(i64::MIN), None, NOW),
            TakeUp::Now
        );
        assert_eq!(
            take_up(&tiers(), ms(5_000), Some(NOW + 3), None, NOW),
            TakeUp::Now,
            "within the slack"
        );
    }

    #[test]
    fn deferrals_do_not_climb_and_end_at_the_maximum_age() {
        let wait = ms(5_000);
        for _ in 0..10 {
            let Decision::Retry(s) = deferral(Some(NOW), &policy(), wait, NOW, &tiers()) else {
                panic!("a retry");
            };
            assert_eq!(s.tier.suffix, "5s", "the same tier every time");
        }
        assert_eq!(
            deferral(Some(NOW - 86_400_001), &policy(), wait, NOW, &tiers()),
            Decision::Park(ErrorReason::MaxAgeExceeded)
        );
        assert!(matches!(
            deferral(None, &policy(), wait, NOW, &tiers()),
            Decision::Retry(_)
        ));
    }

    fn any_tiers() -> impl proptest::strategy::Strategy<Value = RetryTiers> {
        proptest::collection::btree_set(1u64..7_200_000, 1..6).prop_map(|delays| {
            RetryTiers::new(delays.into_iter().map(ms).collect()).expect("valid")
        })
    }

    proptest! {
        #[test]
        fn a_retry_never_waits_in_its_tier_longer_than_the_tier_nor_earlier_than_asked(
            tiers in any_tiers(),
            base_ms in 1u64..600_000,
            cap_extra in 0u64..100_000_000,
            attempts in 1u32..20,
            retry_after_ms in proptest::option::of(0u64..200_000_000),
            seed in any::<u64>(),
        ) {
            let policy = RetryPolicy {
                strategy: Strategy::ExponentialJitter { base: ms(base_ms) },
                cap: ms(base_ms + cap_extra),
                max_attempts: 30,
                max_age: None,
            };
            let state = RetryState { attempts_made: attempts, age_origin_ms: NOW };
            let mut rng = StdRng::seed_from_u64(seed);
            let decision = after_attempt(
                state, &policy, &retryable(retry_after_ms.map(ms)), NOW, &tiers, &mut rng,
            );
            let Decision::Retry(s) = decision else {
                return Err(TestCaseError::fail(format!("expected a retry: {decision:?}")));
            };
            let in_tier = s.due_at_ms - NOW;
            prop_assert!(in_tier >= 0);
            prop_assert!(in_tier <= millis(s.tier.delay), "{in_tier} in {:?}", s.tier);
            let attempt_at = s.retry_at_ms.unwrap_or(s.due_at_ms);
            if let Some(ra) = retry_after_ms {
                prop_assert!(attempt_at - NOW >= i64::try_from(ra).unwrap_or(i64::MAX));
            }
            // The tier is the smallest that holds the wait, or the largest.
            let wait = attempt_at - NOW;
            let largest = tiers.tiers().last().map(|t| millis(t.delay)).unwrap_or(0);
            if wait <= largest {
                prop_assert!(s.retry_at_ms.is_none());
                prop_assert!(millis(s.tier.delay) >= wait);
            } else {
                prop_assert_eq!(millis(s.tier.delay), largest);
            }
        }

        #[test]
        fn take_up_never_pauses_past_the_tier_delay(
            tiers in any_tiers(),
            delay in 1u64..7_200_000,
            due in proptest::option::of(any::<i64>()),
            retry_at in proptest::option::of(any::<i64>()),
            now in 0i64..i64::MAX / 2,
        ) {
            match take_up(&tiers, ms(delay), due, retry_at, now) {
                TakeUp::PauseUntil(until) => {
                    prop_assert!(until > now);
                    prop_assert!(until - now <= i64::try_from(delay).unwrap_or(i64::MAX));
                }
                TakeUp::Hop(s) => {
                    prop_assert!(s.due_at_ms - now <= millis(s.tier.delay));
                    prop_assert!(s.retry_at_ms.unwrap_or(s.due_at_ms) <= retry_at.unwrap_or(i64::MAX));
                }
                TakeUp::Now => {}
            }
        }
    }
}
