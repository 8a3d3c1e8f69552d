//! A per-endpoint circuit breaker on the failure rate over a sliding time window: closed
//! while the rate stays under a threshold, open for a while once it reaches it, then
//! half-open, where a few probes decide. Pure logic: time is always passed in.

use std::time::{Duration, Instant};

/// Buckets the window is kept in, so memory stays fixed whatever the traffic. A result
/// counts for between nine tenths of the window and the whole of it.
const BUCKETS: usize = 10;

/// The breaker's settings: validated values, `Duration`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Opens when `failures * 100 >= failure_rate_percent * requests` over the window
    /// (1..=100).
    pub failure_rate_percent: u8,
    /// ...but only once the window holds at least this many results. 0 disables the
    /// breaker entirely (always `Allow`).
    pub minimum_requests: u32,
    /// The sliding window's length.
    pub window: Duration,
    /// How long it stays open before it turns half-open.
    pub open_for: Duration,
    /// Probes admitted in half-open (at least 1). Once all their results are in, their
    /// failure rate decides: open again at or above the threshold, else closed with a fresh
    /// window.
    pub half_open_probes: u32,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        BreakerPolicy {
            failure_rate_percent: 80,
            minimum_requests: 20,
            window: Duration::from_secs(30),
            open_for: Duration::from_secs(30),
            half_open_probes: 3,
        }
    }
}

impl BreakerPolicy {
    /// How long a caller waits when every probe slot is taken: probes finish far sooner
    /// than the breaker stays open.
    fn busy_retry(&self) -> Duration {
        (self.open_for / 10).max(Duration::from_millis(1))
    }

    fn over_threshold(&self, tally: Tally) -> bool {
        let failures = u64::from(tally.failures).saturating_mul(100);
        failures >= u64::from(self.failure_rate_percent).saturating_mul(u64::from(tally.total()))
    }
}

/// What the breaker says about an attempt that is about to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Closed: attempt as usual.
    Allow,
    /// Half-open: this attempt is a probe; record its result with `probe: true`, or call
    /// [`CircuitBreaker::probe_abandoned`] if it ends without one.
    Probe,
    /// Open, or every probe slot is taken: do not attempt; defer the record.
    Reject {
        /// Time until the breaker could admit again.
        retry_in: Duration,
    },
}

/// The breaker's state, as callers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Attempts are allowed; results fill the window.
    Closed,
    /// Attempts are rejected until `open_for` has passed.
    Open,
    /// A few probes are admitted; their results decide.
    HalfOpen,
}

impl BreakerState {
    /// The state as a metric label.
    pub fn as_str(&self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// Successes and failures, counted with saturation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tally {
    successes: u32,
    failures: u32,
}

impl Tally {
    fn add(&mut self, failed: bool) {
        let count = if failed {
            &mut self.failures
        } else {
            &mut self.successes
        };
        *count = count.saturating_add(1);
    }

    fn total(&self) -> u32 {
        self.successes.saturating_add(self.failures)
    }

    fn sum(self, other: Tally) -> Tally {
        Tally {
            successes: self.successes.saturating_add(other.successes),
            failures: self.failures.saturating_add(other.failures),
        }
    }
}

/// Results over the last `window`, in [`BUCKETS`] buckets, each tagged with its index
/// (bucket lengths since the first result).
#[derive(Debug)]
struct Window {
    bucket_nanos: u128,
    epoch: Option<Instant>,
    /// The newest bucket index used; a timestamp older than it lands in it.
    latest: u64,
    buckets: [(u64, Tally); BUCKETS],
}

impl Window {
    fn new(length: Duration) -> Self {
        Window {
            bucket_nanos: (length.as_nanos() / BUCKETS as u128).max(1),
            epoch: None,
            latest: 0,
            buckets: [(0, Tally::default()); BUCKETS],
        }
    }

    fn record(&mut self, now: Instant, failed: bool) {
        let epoch = *self.epoch.get_or_insert(now);
        let elapsed = now.saturating_duration_since(epoch).as_nanos() / self.bucket_nanos;
        let index = u64::try_from(elapsed).unwrap_or(u64::MAX).max(self.latest);
        self.latest = index;
        let bucket = &mut self.buckets[(index % BUCKETS as u64) as usize];
        if bucket.0 != index {
            *bucket = (index, Tally::default());
        }
        bucket.1.add(failed);
    }

    /// The results in the buckets still inside the window.
    fn tally(&self) -> Tally {
        self.buckets
            .iter()
            .filter(|(index, _)| self.latest.saturating_sub(*index) < BUCKETS as u64)
            .fold(Tally::default(), |sum, (_, tally)| sum.sum(*tally))
    }

    fn clear(&mut self) {
        self.buckets = [(0, Tally::default()); BUCKETS];
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    Open {
        since: Instant,
    },
    /// Probes admitted and not yet answered, and the answers so far.
    HalfOpen {
        in_flight: u32,
        probes: Tally,
    },
}

/// The breaker of one endpoint.
#[derive(Debug)]
pub struct CircuitBreaker {
    policy: BreakerPolicy,
    window: Window,
    phase: Phase,
    /// The results behind the last change of state.
    decided: Tally,
}

impl CircuitBreaker {
    /// A closed breaker. Values out of range are clamped: the rate into 1..=100, the
    /// probes to at least 1 (the dispatcher's config rejects them first).
    pub fn new(policy: BreakerPolicy) -> Self {
        let policy = BreakerPolicy {
            failure_rate_percent: policy.failure_rate_percent.clamp(1, 100),
            half_open_probes: policy.half_open_probes.max(1),
            ..policy
        };
        CircuitBreaker {
            policy,
            window: Window::new(policy.window),
            phase: Phase::Closed,
            decided: Tally::default(),
        }
    }

    /// Whether an attempt may start now, and the new state if this call changed it (open
    /// past `open_for` turns half-open and admits the first probe).
    pub fn admit(&mut self, now: Instant) -> (Admission, Option<BreakerState>) {
        let limit = self.policy.half_open_probes;
        match &mut self.phase {
            Phase::Closed => (Admission::Allow, None),
            Phase::Open { since } => {
                let open = now.saturating_duration_since(*since);
                if open < self.policy.open_for {
                    let retry_in = self.policy.open_for.saturating_sub(open);
                    return (Admission::Reject { retry_in }, None);
                }
                let probes = Tally::default();
                self.phase = Phase::HalfOpen {
                    in_flight: 1,
                    probes,
                };
                (Admission::Probe, Some(BreakerState::HalfOpen))
            }
            // Slots freed by abandoned probes are handed out again; answered ones are not.
            Phase::HalfOpen { in_flight, probes } => {
                if in_flight.saturating_add(probes.total()) < limit {
                    *in_flight = in_flight.saturating_add(1);
                    (Admission::Probe, None)
                } else {
                    let retry_in = self.policy.busy_retry();
                    (Admission::Reject { retry_in }, None)
                }
            }
        }
    }

    /// The endpoint answered in a way that shows it is up. `probe`: the attempt was
    /// admitted as [`Admission::Probe`]. Returns the new state if it changed.
    pub fn record_success(&mut self, now: Instant, probe: bool) -> Option<BreakerState> {
        self.record(now, probe, false)
    }

    /// The endpoint failed in a way that suggests it is down or overloaded. `probe`: the
    /// attempt was admitted as [`Admission::Probe`]. Returns the new state if it changed.
    pub fn record_failure(&mut self, now: Instant, probe: bool) -> Option<BreakerState> {
        self.record(now, probe, true)
    }

    /// An admitted probe ended without a verdict (cancelled): frees its slot.
    pub fn probe_abandoned(&mut self) {
        if let Phase::HalfOpen { in_flight, .. } = &mut self.phase {
            *in_flight = in_flight.saturating_sub(1);
        }
    }

    /// How long it still rejects every attempt, when it is open and `open_for` has not
    /// passed (a half-open breaker admits probes: `None`).
    pub fn open_for_another(&self, now: Instant) -> Option<Duration> {
        match self.phase {
            Phase::Open { since } => self
                .policy
                .open_for
                .checked_sub(now.saturating_duration_since(since))
                .filter(|left| !left.is_zero()),
            Phase::Closed | Phase::HalfOpen { .. } => None,
        }
    }

    /// The current state. An open breaker past `open_for` stays `Open` here until the next
    /// [`admit`](Self::admit).
    pub fn state(&self) -> BreakerState {
        match self.phase {
            Phase::Closed => BreakerState::Closed,
            Phase::Open { .. } => BreakerState::Open,
            Phase::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// The results behind the last change of state, as (failures, requests): the window's
    /// when it opened from closed, the probes' when it closed or opened again.
    pub fn last_decision(&self) -> (u32, u32) {
        (self.decided.failures, self.decided.total())
    }

    fn record(&mut self, now: Instant, probe: bool, failed: bool) -> Option<BreakerState> {
        if self.policy.minimum_requests == 0 {
            return None;
        }
        let verdict = match &mut self.phase {
            // Late answers to attempts admitted before it opened: nothing new to learn.
            Phase::Open { .. } => return None,
            Phase::Closed => {
                self.window.record(now, failed);
                let tally = self.window.tally();
                let opens = tally.total() >= self.policy.minimum_requests
                    && self.policy.over_threshold(tally);
                if opens {
                    self.decided = tally;
                }
                return opens.then(|| self.open(now));
            }
            // Only the probes decide; answers to attempts admitted while closed do not.
            Phase::HalfOpen { in_flight, probes } => {
                if !probe || *in_flight == 0 {
                    return None;
                }
                *in_flight = in_flight.saturating_sub(1);
                probes.add(failed);
                if probes.total() < self.policy.half_open_probes {
                    return None;
                }
                *probes
            }
        };
        self.decided = verdict;
        if self.policy.over_threshold(verdict) {
            return Some(self.open(now));
        }
        self.window.clear();
        self.phase = Phase::Closed;
        Some(BreakerState::Closed)
    }

    fn open(&mut self, now: Instant) -> BreakerState {
        self.phase = Phase::Open { since: now };
        BreakerState::Open
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn reject(retry_ms: u64) -> (Admission, Option<BreakerState>) {
        let retry_in = ms(retry_ms);
        (Admission::Reject { retry_in }, None)
    }

    const PROBE: (Admission, Option<BreakerState>) = (Admission::Probe, None);

    /// A default breaker opened by failures 100 ms apart, and when it opened.
    fn opened(start: Instant) -> (CircuitBreaker, Instant) {
        let mut breaker = CircuitBreaker::new(BreakerPolicy::default());
        for i in 0..19 {
            assert_eq!(breaker.record_failure(start + ms(i * 100), false), None);
        }
        let at = start + ms(1_900);
        assert_eq!(breaker.record_failure(at, false), Some(BreakerState::Open));
        (breaker, at)
    }

    #[test]
    fn the_results_behind_each_change_are_kept() {
        let start = Instant::now();
        let mut breaker = CircuitBreaker::new(BreakerPolicy::default());
        assert_eq!(breaker.last_decision(), (0, 0));
        for i in 0..5 {
            breaker.record_success(start + ms(i * 100), false);
        }
        let mut changed = None;
        let mut i = 5;
        while changed.is_none() {
            changed = breaker.record_failure(start + ms(i * 100), false);
            i += 1;
        }
        assert_eq!(changed, Some(BreakerState::Open));
        // 80 % of the window: 20 failures beside 5 successes.
        assert_eq!(breaker.last_decision(), (20, 25));
        let later = start + ms(60_000);
        for _ in 0..3 {
            assert_eq!(breaker.admit(later).0, Admission::Probe);
        }
        breaker.record_failure(later, true);
        breaker.record_success(later, true);
        assert_eq!(
            breaker.record_success(later, true),
            Some(BreakerState::Closed)
        );
        assert_eq!(breaker.last_decision(), (1, 3), "the probes decided");
    }

    #[test]
    fn an_open_breaker_says_how_long_it_stays_shut() {
        let start = Instant::now();
        let closed = CircuitBreaker::new(BreakerPolicy::default());
        assert_eq!(closed.open_for_another(start), None);
        let (mut breaker, opened_at) = opened(start);
        assert_eq!(
            breaker.open_for_another(opened_at + ms(1_000)),
            Some(ms(29_000))
        );
        assert_eq!(breaker.open_for_another(opened_at + ms(30_000)), None);
        assert_eq!(breaker.admit(opened_at + ms(30_000)).0, Admission::Probe);
        assert_eq!(
            breaker.open_for_another(opened_at + ms(30_000)),
            None,
            "half-open"
        );
    }

    #[test]
    fn a_half_failing_endpoint_never_opens_with_the_default_policy() {
        let start = Instant::now();
        let mut breaker = CircuitBreaker::new(BreakerPolicy::default());
        for i in 0..1_000u64 {
            let now = start + ms(i * 200); // 200 s of simulated time
            assert_eq!(breaker.admit(now), (Admission::Allow, None), "request {i}");
            let changed = if i % 2 == 0 {
                breaker.record_success(now, false)
            } else {
                breaker.record_failure(now, false)
            };
            assert_eq!(changed, None, "request {i}");
        }
        assert_eq!(breaker.state(), BreakerState::Closed);
    }

    #[test]
    fn a_dead_endpoint_opens_then_probes_reopen_or_close_it() {
        let (mut breaker, opened_at) = opened(Instant::now());
        assert_eq!(breaker.admit(opened_at + ms(1_000)), reject(29_000));
        // Late answers to attempts admitted before it opened change nothing.
        assert_eq!(breaker.record_success(opened_at, false), None);
        assert_eq!(breaker.record_failure(opened_at, true), None);
        assert_eq!(breaker.state(), BreakerState::Open);

        let half_open = opened_at + ms(30_000);
        let first = breaker.admit(half_open);
        assert_eq!(first, (Admission::Probe, Some(BreakerState::HalfOpen)));
        assert_eq!(breaker.admit(half_open), PROBE);
        assert_eq!(breaker.admit(half_open), PROBE);
        assert_eq!(breaker.admit(half_open), reject(3_000), "only three probes");
        // Answers to attempts admitted while closed do not decide.
        for _ in 0..50 {
            assert_eq!(breaker.record_success(half_open, false), None);
        }
        assert_eq!(breaker.record_failure(half_open, true), None);
        assert_eq!(breaker.record_failure(half_open, true), None);
        assert_eq!(
            breaker.admit(half_open),
            reject(3_000),
            "answered ones count"
        );
        let reopened = half_open + ms(500);
        let last = breaker.record_failure(reopened, true);
        assert_eq!(last, Some(BreakerState::Open));
        assert_eq!(breaker.admit(reopened), reject(30_000));

        // Next time one failed probe in three is under the threshold: closed, and the 20
        // failures that opened it are gone from the window.
        let half_open = reopened + ms(30_000);
        for _ in 0..3 {
            assert_eq!(breaker.admit(half_open).0, Admission::Probe);
        }
        assert_eq!(breaker.record_failure(half_open, true), None);
        assert_eq!(breaker.record_success(half_open, true), None);
        let last = breaker.record_success(half_open, true);
        assert_eq!(last, Some(BreakerState::Closed));
        assert_eq!(breaker.window.tally().total(), 0);
        assert_eq!(breaker.admit(half_open), (Admission::Allow, None));
    }

    #[test]
    fn too_few_or_too_old_results_never_open_it() {
        let start = Instant::now();
        let mut breaker = CircuitBreaker::new(BreakerPolicy::default());
        for _ in 0..19 {
            assert_eq!(breaker.record_failure(start, false), None);
        }
        assert_eq!(breaker.admit(start), (Admission::Allow, None));
        // 40 s later those 19 are out of the 30 s window: one failure is one result.
        assert_eq!(breaker.record_failure(start + ms(40_000), false), None);
        assert_eq!(breaker.window.tally().total(), 1);

        // Within the window they count: the 20th failure 20 s later opens it.
        let mut breaker = CircuitBreaker::new(BreakerPolicy::default());
        for _ in 0..19 {
            breaker.record_failure(start, false);
        }
        let twentieth = breaker.record_failure(start + ms(20_000), false);
        assert_eq!(twentieth, Some(BreakerState::Open));
    }

    #[test]
    fn minimum_requests_zero_disables_it() {
        let start = Instant::now();
        let mut breaker = CircuitBreaker::new(BreakerPolicy {
            minimum_requests: 0,
            ..BreakerPolicy::default()
        });
        for i in 0..1_000 {
            let now = start + ms(i);
            assert_eq!(breaker.admit(now), (Admission::Allow, None));
            assert_eq!(breaker.record_failure(now, false), None);
        }
        assert_eq!(breaker.state(), BreakerState::Closed);
    }

    #[test]
    fn probe_abandoned_frees_a_slot() {
        let (mut breaker, opened_at) = opened(Instant::now());
        let half_open = opened_at + ms(30_000);
        for _ in 0..3 {
            assert_eq!(breaker.admit(half_open).0, Admission::Probe);
        }
        assert_eq!(breaker.admit(half_open), reject(3_000));
        breaker.probe_abandoned();
        assert_eq!(breaker.admit(half_open), PROBE);
        assert_eq!(breaker.admit(half_open), reject(3_000));
    }

    #[test]
    fn new_clamps_out_of_range_values() {
        let breaker = CircuitBreaker::new(BreakerPolicy {
            failure_rate_percent: 0,
            half_open_probes: 0,
            ..BreakerPolicy::default()
        });
        assert_eq!(breaker.policy.failure_rate_percent, 1);
        assert_eq!(breaker.policy.half_open_probes, 1);
        assert_eq!(BreakerState::HalfOpen.as_str(), "half_open");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Admit,
        Record { failed: bool, probe: bool },
        Abandon,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Admit),
            (any::<bool>(), any::<bool>()).prop_map(|(failed, probe)| Op::Record { failed, probe }),
            Just(Op::Abandon),
        ]
    }

    proptest! {
        #[test]
        fn any_call_sequence_keeps_probes_bounded(
            failure_rate_percent in 0u8..=120,
            minimum_requests in 0u32..30,
            window_ms in 0u64..60_000,
            open_ms in 0u64..60_000,
            half_open_probes in 0u32..5,
            steps in prop::collection::vec((op(), 0u64..5_000), 0..300),
        ) {
            let mut breaker = CircuitBreaker::new(BreakerPolicy {
                failure_rate_percent,
                minimum_requests,
                window: ms(window_ms),
                open_for: ms(open_ms),
                half_open_probes,
            });
            let mut now = Instant::now();
            // The caller's count of the probes it holds.
            let mut outstanding = 0u32;
            for (op, advance_ms) in steps {
                now += ms(advance_ms);
                match op {
                    Op::Admit => match breaker.admit(now).0 {
                        Admission::Probe => outstanding += 1,
                        Admission::Reject { retry_in } => prop_assert!(!retry_in.is_zero()),
                        Admission::Allow => {}
                    },
                    Op::Record { failed, probe } => {
                        if probe {
                            outstanding = outstanding.saturating_sub(1);
                        }
                        let record = if failed {
                            CircuitBreaker::record_failure
                        } else {
                            CircuitBreaker::record_success
                        };
                        record(&mut breaker, now, probe);
                    }
                    Op::Abandon => {
                        outstanding = outstanding.saturating_sub(1);
                        breaker.probe_abandoned();
                    }
                }
                let in_flight = match breaker.phase {
                    Phase::HalfOpen { in_flight, .. } => in_flight,
                    _ => 0,
                };
                prop_assert!(outstanding <= half_open_probes.max(1));
                prop_assert_eq!(in_flight, outstanding);
            }
        }
    }
}
