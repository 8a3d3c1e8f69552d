//! An endpoint's standing: whether its attempts finish quickly ([`Class::Fast`]), have not
//! shown it yet ([`Class::Unproven`]), or are slow, failing, throttled or stalled
//! ([`Class::Slow`]); and its concurrency limit, which adapts to the same outcomes (AIMD, as
//! Netflix's concurrency-limits: one more after a quick success, a tenth less after a failure
//! or an attempt over `slow_after`), between 1 and its configured cap. Pure: times are passed
//! in.

use std::time::{Duration, Instant};

use tower_acc::{Aimd, Algorithm};

/// Weight of the latest outcome in the share of bad ones.
const BAD_WEIGHT: f64 = 0.25;
/// The share of bad outcomes at which an endpoint is slow: about three bad ones in a row
/// from a clean record; three good ones in a row bring it back.
const SLOW_AT: f64 = 0.5;

/// Which budget an endpoint's records draw on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// No attempt of it has ended well yet: its records draw on the slow endpoints' shared
    /// budget, as a slow one's, until one does.
    Unproven,
    /// Its attempts end quickly and well: its records are held up to its queue, and its
    /// attempts need only the dispatcher's permits.
    Fast,
    /// Slow, failing, throttled, stalled, or its circuit is open: each of its records needs a
    /// unit of the slow endpoints' shared budget, or it goes to the slow lane.
    Slow,
}

/// What the dispatcher knows of one endpoint's recent attempts.
#[derive(Debug)]
pub(crate) struct Standing {
    limit: Aimd,
    slow_after: Duration,
    /// The share of recent outcomes that were bad (failed, or took over `slow_after`).
    bad: f64,
    /// How long its recent attempts took (a moving average), once one ended.
    latency: Option<Duration>,
    in_flight: usize,
    /// When an attempt last ended, or when the first of those running began.
    last_progress: Option<Instant>,
    proven: bool,
    /// Records taken in and not finished that count against its queue.
    held: usize,
}

impl Standing {
    /// An endpoint with concurrency cap `max_concurrency`, whose attempts are slow past
    /// `slow_after`.
    pub(crate) fn new(max_concurrency: usize, slow_after: Duration) -> Standing {
        let max = max_concurrency.max(1);
        Standing {
            limit: Aimd::builder()
                .min_limit(1)
                .max_limit(max)
                .initial_limit(max)
                .timeout(slow_after)
                .build(),
            slow_after,
            bad: 0.0,
            latency: None,
            in_flight: 0,
            last_progress: None,
            proven: false,
            held: 0,
        }
    }

    /// Its standing at `now`, its circuit open or not.
    pub(crate) fn class(&self, now: Instant, circuit_open: bool) -> Class {
        if circuit_open || self.stalled(now) || self.bad >= SLOW_AT {
            Class::Slow
        } else if self.proven {
            Class::Fast
        } else {
            Class::Unproven
        }
    }

    /// Whether its attempts running now have gone `slow_after` without one ending.
    fn stalled(&self, now: Instant) -> bool {
        self.in_flight > 0
            && self
                .last_progress
                .is_some_and(|at| now.saturating_duration_since(at) > self.slow_after)
    }

    /// Whether its attempts end quickly, well or not (within a tenth of `slow_after` on
    /// average, none stalled at `now`): an endpoint failing or throttling at once, whose
    /// attempt cannot hold a partition's commit for long.
    pub(crate) fn answers_quickly(&self, now: Instant) -> bool {
        !self.stalled(now)
            && self
                .latency
                .is_some_and(|latency| latency <= self.slow_after / 10)
    }

    /// When its attempts running now will have stalled, if some run.
    pub(crate) fn stalls_at(&self) -> Option<Instant> {
        if self.in_flight == 0 {
            return None;
        }
        // Stalled is strictly past `slow_after`: a millisecond on, as timers count.
        self.last_progress
            .map(|at| at + self.slow_after + Duration::from_millis(1))
    }

    /// How many attempts it may run at once now.
    pub(crate) fn limit(&self) -> usize {
        self.limit.max_concurrency()
    }

    /// An attempt begins at `now`.
    pub(crate) fn attempt_started(&mut self, now: Instant) {
        if self.in_flight == 0 {
            self.last_progress = Some(now);
        }
        self.in_flight += 1;
    }

    /// An attempt that took `took` ended at `now`, well (`ok`: an answer that shows the
    /// endpoint alive) or not.
    pub(crate) fn attempt_ended(&mut self, now: Instant, took: Duration, ok: bool) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.last_progress = Some(now);
        let good = ok && took <= self.slow_after;
        self.latency = Some(match self.latency {
            Some(average) => average.mul_f64(1.0 - BAD_WEIGHT) + took.mul_f64(BAD_WEIGHT),
            None => took,
        });
        self.bad = self.bad * (1.0 - BAD_WEIGHT) + if good { 0.0 } else { BAD_WEIGHT };
        self.limit.update(took, self.in_flight + 1, !ok, false);
        if good {
            self.proven = true;
        }
    }

    /// An attempt that began ended without an answer to judge (it was cancelled).
    pub(crate) fn attempt_abandoned(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Takes a place in its queue of `capacity`, if one is free.
    pub(crate) fn hold(&mut self, capacity: usize) -> bool {
        if self.held >= capacity.max(1) {
            return false;
        }
        self.held += 1;
        true
    }

    /// A place in its queue is free again.
    pub(crate) fn unhold(&mut self) {
        self.held = self.held.saturating_sub(1);
    }

    /// Whether half of a full queue of `capacity` drains within a tenth of `slow_after` at its
    /// recent pace (Little's law: records over concurrency, times latency): then a partition
    /// may wait for it, as it costs the records behind less than that.
    pub(crate) fn drains_quickly(&self, capacity: usize) -> bool {
        let Some(latency) = self.latency else {
            return false;
        };
        let half = u32::try_from(capacity / 2).unwrap_or(u32::MAX);
        let concurrency = u32::try_from(self.limit().max(1)).unwrap_or(u32::MAX);
        latency.saturating_mul(half) / concurrency <= self.slow_after / 10
    }

    /// Whether its queue of `capacity` has room for more (below half of it), so a partition
    /// paused for it may go on.
    pub(crate) fn has_room(&self, capacity: usize) -> bool {
        self.held <= capacity / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLOW_AFTER: Duration = Duration::from_secs(1);

    fn quick(standing: &mut Standing, now: Instant) {
        standing.attempt_started(now);
        standing.attempt_ended(now, Duration::from_millis(5), true);
    }

    #[test]
    fn an_endpoint_is_unproven_until_an_attempt_ends_well_then_fast() {
        let now = Instant::now();
        let mut standing = Standing::new(16, SLOW_AFTER);
        assert_eq!(standing.class(now, false), Class::Unproven);
        assert_eq!(standing.limit(), 16);
        quick(&mut standing, now);
        assert_eq!(standing.class(now, false), Class::Fast);
        assert_eq!(
            standing.class(now, true),
            Class::Slow,
            "an open circuit is slow"
        );
    }

    #[test]
    fn slow_or_failing_answers_make_it_slow_and_its_limit_fall_then_quick_ones_bring_it_back() {
        let now = Instant::now();
        let mut standing = Standing::new(16, SLOW_AFTER);
        quick(&mut standing, now);
        for _ in 0..3 {
            standing.attempt_started(now);
            standing.attempt_ended(now, Duration::from_secs(2), true);
        }
        assert_eq!(standing.class(now, false), Class::Slow);
        assert!(standing.limit() < 16, "{}", standing.limit());
        for _ in 0..40 {
            standing.attempt_started(now);
            standing.attempt_ended(now, Duration::from_millis(1), false);
        }
        assert_eq!(standing.limit(), 1, "failures bring it down to one");
        for _ in 0..3 {
            quick(&mut standing, now);
        }
        assert_eq!(standing.class(now, false), Class::Fast);
    }

    #[test]
    fn attempts_that_run_past_slow_after_with_none_ending_make_it_slow_before_they_end() {
        let start = Instant::now();
        let mut standing = Standing::new(16, SLOW_AFTER);
        quick(&mut standing, start);
        standing.attempt_started(start);
        let stalls_at = standing.stalls_at().expect("attempts run");
        assert_eq!(standing.class(stalls_at, false), Class::Slow);
        assert_eq!(standing.class(start + SLOW_AFTER, false), Class::Fast);
        let later = start + SLOW_AFTER + Duration::from_millis(1);
        assert_eq!(standing.class(later, false), Class::Slow, "stalled");
        // One ending is progress; with none running it is not stalled.
        standing.attempt_ended(later, Duration::from_millis(5), true);
        assert_eq!(standing.class(later + SLOW_AFTER * 2, false), Class::Fast);
    }

    #[test]
    fn an_endpoint_failing_at_once_answers_quickly_one_slow_or_stalled_does_not() {
        let now = Instant::now();
        let mut standing = Standing::new(16, SLOW_AFTER);
        assert!(!standing.answers_quickly(now), "nothing known yet");
        for _ in 0..4 {
            standing.attempt_started(now);
            standing.attempt_ended(now, Duration::from_millis(2), false);
        }
        assert_eq!(standing.class(now, false), Class::Slow, "failing");
        assert!(standing.answers_quickly(now));
        standing.attempt_started(now);
        assert!(!standing.answers_quickly(now + SLOW_AFTER * 2), "stalled");
        standing.attempt_ended(now, Duration::from_secs(2), false);
        standing.attempt_started(now);
        standing.attempt_ended(now, Duration::from_secs(2), false);
        assert!(!standing.answers_quickly(now), "slow answers");
    }

    #[test]
    fn a_queue_drains_quickly_when_its_half_takes_under_a_tenth_of_slow_after() {
        let now = Instant::now();
        let mut standing = Standing::new(16, SLOW_AFTER);
        assert!(!standing.drains_quickly(256), "nothing known yet");
        quick(&mut standing, now);
        // 128 records x 5 ms / 16 at once = 40 ms.
        assert!(standing.drains_quickly(256));
        for _ in 0..20 {
            standing.attempt_started(now);
            standing.attempt_ended(now, Duration::from_millis(500), true);
        }
        assert!(!standing.drains_quickly(256), "128 x 500 ms / 16 = 4 s");
    }

    #[test]
    fn its_queue_holds_up_to_its_capacity_and_has_room_below_half() {
        let mut standing = Standing::new(4, SLOW_AFTER);
        assert!((0..4).all(|_| standing.hold(4)));
        assert!(!standing.hold(4));
        assert!(!standing.has_room(4));
        standing.unhold();
        standing.unhold();
        assert!(standing.has_room(4));
    }
}
