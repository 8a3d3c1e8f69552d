//! Delivery telemetry as named events: each outcome of a delivery is one value that emits
//! its log line, its counters and its lifecycle step in one place, and the lifecycle checks
//! every step against the core state machine.

use std::time::Duration;

use hookline_core::envelope::ErrorReason;
use hookline_core::state::{DeliveryState, Transition};

use crate::metrics::Metrics;

/// A step of a delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Validate,
    Process,
    Succeed,
    Fail,
    Reject,
    Schedule,
    Resume,
    Park,
}

/// Where one delivery is in its lifecycle.
pub(crate) struct Lifecycle<'a> {
    state: DeliveryState,
    metrics: &'a Metrics,
}

impl<'a> Lifecycle<'a> {
    /// A delivery just received.
    pub fn new(metrics: &'a Metrics) -> Self {
        Lifecycle {
            state: DeliveryState::Received,
            metrics,
        }
    }

    /// Moves to the next state. An illegal step is a bug: it is logged, never fatal.
    pub fn step(&mut self, step: Step) {
        let transition = match step {
            Step::Validate => Transition::Validate,
            Step::Process => Transition::Accept,
            Step::Succeed => Transition::Succeed,
            Step::Fail => Transition::Fail,
            Step::Reject => Transition::Reject,
            Step::Schedule => Transition::ScheduleRetry,
            Step::Resume => Transition::Resume,
            Step::Park => Transition::DeadLetter,
        };
        match self.state.transition(transition) {
            Ok(next) => {
                self.state = next;
                self.metrics.transition(next);
                tracing::debug!(state = next.as_str(), "delivery state");
            }
            Err(error) => tracing::error!(%error, "illegal delivery state transition"),
        }
    }

    /// Parks the delivery from wherever it is: a delivery given up before an attempt (a
    /// deferral past its maximum age, a copy that can never be written) is rejected or
    /// failed first, so that every path walks legal steps.
    fn park(&mut self) {
        match self.state {
            DeliveryState::Received => {
                self.step(Step::Validate);
                self.step(Step::Reject);
            }
            DeliveryState::Validating => self.step(Step::Reject),
            DeliveryState::Processing => self.step(Step::Fail),
            DeliveryState::Failed
            | DeliveryState::Rejected
            | DeliveryState::Succeeded
            | DeliveryState::Dlq
            | DeliveryState::ScheduledRetry => {}
        }
        self.step(Step::Park);
    }
}

/// How a delivery ended; every variant is durable when emitted.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    /// The endpoint answered 2xx.
    Delivered {
        /// How long the last attempt took.
        took: Duration,
    },
    /// The delivery ledger knew the endpoint had it: not sent again.
    DuplicateSuppressed,
    /// An attempt failed and a retry record was written to a tier.
    RetryScheduled {
        tier: String,
        /// The attempt's failure code (`http_5xx`, `timeout`...).
        reason: &'static str,
        delay_ms: i64,
    },
    /// Put off to a tier without an attempt (breaker open, queue full, held too long).
    Deferred { tier: String, why: &'static str },
    /// A tier record whose wait is longer than its tier written again, without an attempt.
    Hopped { tier: String },
    /// Written to the DLQ.
    Parked {
        reason: ErrorReason,
        message: String,
        /// Whether the envelope carries only the start of the original value.
        payload_cut: bool,
    },
}

impl Outcome {
    /// Emits the outcome: its log line, counters and lifecycle step.
    pub fn emit(&self, metrics: &Metrics, life: &mut Lifecycle<'_>) {
        match self {
            Outcome::Delivered { took } => {
                life.step(Step::Succeed);
                metrics.delivered();
                tracing::info!(took_ms = took.as_millis(), "delivered");
            }
            Outcome::DuplicateSuppressed => {
                life.step(Step::Process);
                life.step(Step::Succeed);
                metrics.duplicate_suppressed();
                tracing::info!(
                    "already acknowledged by the endpoint (delivery ledger); not sent again"
                );
            }
            Outcome::RetryScheduled {
                tier,
                reason,
                delay_ms,
            } => {
                life.step(Step::Schedule);
                metrics.retry_scheduled(tier);
                tracing::info!(reason, delay_ms, tier, "attempt failed; retry scheduled");
            }
            Outcome::Deferred { tier, why } => {
                metrics.deferred(tier, why);
                tracing::info!(why, tier, "deferred without an attempt");
            }
            Outcome::Hopped { tier } => {
                metrics.hopped(tier);
                tracing::debug!(tier, "not due yet; written again for the rest of its wait");
            }
            Outcome::Parked {
                reason,
                message,
                payload_cut,
            } => {
                life.park();
                metrics.parked(reason.code());
                tracing::warn!(
                    reason = reason.code(),
                    error = %message,
                    payload_cut,
                    "parked in the DLQ"
                );
            }
        }
    }
}
