//! The delivery state machine as a delivery walks it: every step is checked against the
//! legal transitions of the core state machine, counted, and logged with the delivery's ids.

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

    /// A delivery taken up again after an attempt failed (a deferral).
    pub fn resumed(metrics: &'a Metrics) -> Self {
        Lifecycle {
            state: DeliveryState::Failed,
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
                self.metrics.transition(next.as_str());
                tracing::debug!(state = next.as_str(), "delivery state");
            }
            Err(error) => tracing::error!(%error, "illegal delivery state transition"),
        }
    }
}
