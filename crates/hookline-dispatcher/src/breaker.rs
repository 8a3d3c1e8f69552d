//! A per-endpoint circuit breaker: after repeated failures an endpoint is left alone for a
//! while (its records go straight to the next retry tier), then one probe decides.

use std::time::{Duration, Instant};

/// What the breaker says about an attempt that is about to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Closed: attempt as usual.
    Allow,
    /// Half-open: this attempt is the probe; its result opens or closes the breaker.
    Probe,
    /// Open, or a probe is already running: do not attempt; defer the record.
    Reject,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Closed { consecutive_failures: u32 },
    Open { until: Instant },
    HalfOpen { probing: bool },
}

/// The breaker of one endpoint.
#[derive(Debug)]
pub struct CircuitBreaker {
    failure_threshold: u32,
    open_for: Duration,
    state: State,
}

impl CircuitBreaker {
    /// Opens after `failure_threshold` consecutive failures (0 disables it) for `open_for`.
    pub fn new(failure_threshold: u32, open_for: Duration) -> Self {
        CircuitBreaker {
            failure_threshold,
            open_for,
            state: State::Closed {
                consecutive_failures: 0,
            },
        }
    }

    /// Whether an attempt may start now.
    pub fn admit(&mut self, now: Instant) -> Admission {
        match self.state {
            State::Closed { .. } => Admission::Allow,
            State::Open { until } if now >= until => {
                self.state = State::HalfOpen { probing: true };
                Admission::Probe
            }
            State::Open { .. } => Admission::Reject,
            State::HalfOpen { probing: true } => Admission::Reject,
            State::HalfOpen { probing: false } => {
                self.state = State::HalfOpen { probing: true };
                Admission::Probe
            }
        }
    }

    /// The endpoint answered (any answer that shows it is alive and well).
    pub fn record_success(&mut self) {
        self.state = State::Closed {
            consecutive_failures: 0,
        };
    }

    /// The endpoint failed in a way that suggests it is down or overloaded.
    pub fn record_failure(&mut self, now: Instant) {
        self.state = match self.state {
            State::Closed {
                consecutive_failures,
            } => {
                let failures = consecutive_failures.saturating_add(1);
                if self.failure_threshold > 0 && failures >= self.failure_threshold {
                    State::Open {
                        until: now + self.open_for,
                    }
                } else {
                    State::Closed {
                        consecutive_failures: failures,
                    }
                }
            }
            State::HalfOpen { .. } => State::Open {
                until: now + self.open_for,
            },
            open @ State::Open { .. } => open,
        };
    }

    /// An admitted probe ended without an answer either way (for example on shutdown).
    pub fn probe_abandoned(&mut self) {
        if let State::HalfOpen { probing: true } = self.state {
            self.state = State::HalfOpen { probing: false };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_the_threshold_and_probes_after_the_pause() {
        let start = Instant::now();
        let mut breaker = CircuitBreaker::new(3, Duration::from_secs(10));
        for _ in 0..2 {
            assert_eq!(breaker.admit(start), Admission::Allow);
            breaker.record_failure(start);
        }
        assert_eq!(breaker.admit(start), Admission::Allow);
        breaker.record_failure(start);
        assert_eq!(
            breaker.admit(start + Duration::from_secs(9)),
            Admission::Reject
        );
        let later = start + Duration::from_secs(10);
        assert_eq!(breaker.admit(later), Admission::Probe);
        assert_eq!(
            breaker.admit(later),
            Admission::Reject,
            "one probe at a time"
        );
        breaker.record_success();
        assert_eq!(breaker.admit(later), Admission::Allow);
    }

    #[test]
    fn a_failed_probe_opens_again() {
        let start = Instant::now();
        let mut breaker = CircuitBreaker::new(1, Duration::from_secs(1));
        breaker.record_failure(start);
        let probe_at = start + Duration::from_secs(1);
        assert_eq!(breaker.admit(probe_at), Admission::Probe);
        breaker.record_failure(probe_at);
        assert_eq!(
            breaker.admit(probe_at + Duration::from_millis(999)),
            Admission::Reject
        );
        assert_eq!(
            breaker.admit(probe_at + Duration::from_secs(1)),
            Admission::Probe
        );
    }

    #[test]
    fn a_success_resets_the_count_and_zero_disables() {
        let now = Instant::now();
        let mut breaker = CircuitBreaker::new(2, Duration::from_secs(1));
        breaker.record_failure(now);
        breaker.record_success();
        breaker.record_failure(now);
        assert_eq!(breaker.admit(now), Admission::Allow);
        let mut disabled = CircuitBreaker::new(0, Duration::from_secs(1));
        for _ in 0..100 {
            disabled.record_failure(now);
        }
        assert_eq!(disabled.admit(now), Admission::Allow);
    }
}
