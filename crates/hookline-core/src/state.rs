//! The delivery lifecycle as a state machine: which steps are legal from which state.
//!
//! ```text
//! Received -> Validating -> Processing -> Succeeded
//! Validating -> Rejected -> Dlq
//! Processing -> Failed -> ScheduledRetry -> Processing
//! Failed -> Dlq
//! ```

use std::fmt;

/// Where one delivery is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    /// Consumed from a topic.
    Received,
    /// Being decoded and checked (event, endpoint, URL).
    Validating,
    /// An HTTP attempt is in flight.
    Processing,
    /// The endpoint answered 2xx. Terminal.
    Succeeded,
    /// The attempt failed; a retry or the DLQ follows.
    Failed,
    /// Refused before any attempt (malformed, unknown endpoint, blocked URL); the DLQ follows.
    Rejected,
    /// Parked in the dead-letter topic. Terminal.
    Dlq,
    /// Written to a retry tier, to be attempted again when due.
    ScheduledRetry,
}

/// A step between states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    /// Received -> Validating.
    Validate,
    /// Validating -> Processing.
    Accept,
    /// Validating -> Rejected.
    Reject,
    /// Processing -> Succeeded.
    Succeed,
    /// Processing -> Failed.
    Fail,
    /// Failed -> ScheduledRetry.
    ScheduleRetry,
    /// Rejected or Failed -> Dlq.
    DeadLetter,
    /// ScheduledRetry -> Processing, when the retry is due.
    Resume,
}

/// A step that is not legal from the current state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition `{transition}` from state `{from}`")]
pub struct IllegalTransition {
    /// The state the step was tried from.
    pub from: DeliveryState,
    /// The step.
    pub transition: Transition,
}

impl Transition {
    /// Every transition.
    pub const ALL: [Transition; 8] = [
        Transition::Validate,
        Transition::Accept,
        Transition::Reject,
        Transition::Succeed,
        Transition::Fail,
        Transition::ScheduleRetry,
        Transition::DeadLetter,
        Transition::Resume,
    ];

    /// The states this step may start from.
    pub fn sources(self) -> &'static [DeliveryState] {
        use DeliveryState as S;
        match self {
            Transition::Validate => &[S::Received],
            Transition::Accept | Transition::Reject => &[S::Validating],
            Transition::Succeed | Transition::Fail => &[S::Processing],
            Transition::ScheduleRetry => &[S::Failed],
            Transition::DeadLetter => &[S::Rejected, S::Failed],
            Transition::Resume => &[S::ScheduledRetry],
        }
    }

    /// The state this step leads to.
    pub fn target(self) -> DeliveryState {
        match self {
            Transition::Validate => DeliveryState::Validating,
            Transition::Accept | Transition::Resume => DeliveryState::Processing,
            Transition::Reject => DeliveryState::Rejected,
            Transition::Succeed => DeliveryState::Succeeded,
            Transition::Fail => DeliveryState::Failed,
            Transition::ScheduleRetry => DeliveryState::ScheduledRetry,
            Transition::DeadLetter => DeliveryState::Dlq,
        }
    }

    /// A snake_case label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Transition::Validate => "validate",
            Transition::Accept => "accept",
            Transition::Reject => "reject",
            Transition::Succeed => "succeed",
            Transition::Fail => "fail",
            Transition::ScheduleRetry => "schedule_retry",
            Transition::DeadLetter => "dead_letter",
            Transition::Resume => "resume",
        }
    }
}

impl DeliveryState {
    /// Every state.
    pub const ALL: [DeliveryState; 8] = [
        DeliveryState::Received,
        DeliveryState::Validating,
        DeliveryState::Processing,
        DeliveryState::Succeeded,
        DeliveryState::Failed,
        DeliveryState::Rejected,
        DeliveryState::Dlq,
        DeliveryState::ScheduledRetry,
    ];

    /// Takes a step, or says it is illegal from this state.
    pub fn transition(self, transition: Transition) -> Result<DeliveryState, IllegalTransition> {
        if transition.sources().contains(&self) {
            Ok(transition.target())
        } else {
            Err(IllegalTransition {
                from: self,
                transition,
            })
        }
    }

    /// Whether no step leads on from this state.
    pub fn is_terminal(self) -> bool {
        match self {
            DeliveryState::Succeeded | DeliveryState::Dlq => true,
            DeliveryState::Received
            | DeliveryState::Validating
            | DeliveryState::Processing
            | DeliveryState::Failed
            | DeliveryState::Rejected
            | DeliveryState::ScheduledRetry => false,
        }
    }

    /// A snake_case label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Received => "received",
            DeliveryState::Validating => "validating",
            DeliveryState::Processing => "processing",
            DeliveryState::Succeeded => "succeeded",
            DeliveryState::Failed => "failed",
            DeliveryState::Rejected => "rejected",
            DeliveryState::Dlq => "dlq",
            DeliveryState::ScheduledRetry => "scheduled_retry",
        }
    }
}

impl fmt::Display for DeliveryState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::DeliveryState as S;
    use super::Transition as T;
    use super::*;

    const LEGAL: [(DeliveryState, Transition, DeliveryState); 9] = [
        (S::Received, T::Validate, S::Validating),
        (S::Validating, T::Accept, S::Processing),
        (S::Validating, T::Reject, S::Rejected),
        (S::Rejected, T::DeadLetter, S::Dlq),
        (S::Processing, T::Succeed, S::Succeeded),
        (S::Processing, T::Fail, S::Failed),
        (S::Failed, T::ScheduleRetry, S::ScheduledRetry),
        (S::Failed, T::DeadLetter, S::Dlq),
        (S::ScheduledRetry, T::Resume, S::Processing),
    ];

    #[test]
    fn every_legal_edge() {
        for (from, t, to) in LEGAL {
            assert_eq!(from.transition(t), Ok(to), "{from} --{t}-->");
        }
    }

    #[test]
    fn every_other_edge_is_illegal() {
        let mut illegal = 0;
        for from in DeliveryState::ALL {
            for t in Transition::ALL {
                if LEGAL.iter().any(|(f, tr, _)| *f == from && *tr == t) {
                    continue;
                }
                assert_eq!(
                    from.transition(t),
                    Err(IllegalTransition {
                        from,
                        transition: t
                    })
                );
                illegal += 1;
            }
        }
        assert_eq!(illegal, 64 - LEGAL.len());
    }

    #[test]
    fn selected_illegal_steps() {
        assert!(S::Received.transition(T::Accept).is_err());
        assert!(S::Validating.transition(T::DeadLetter).is_err());
        assert!(S::Succeeded.transition(T::Fail).is_err());
        assert!(S::Dlq.transition(T::Resume).is_err());
        assert!(S::ScheduledRetry.transition(T::Succeed).is_err());
        assert!(S::Rejected.transition(T::ScheduleRetry).is_err());
        let err = S::Succeeded.transition(T::Fail).expect_err("illegal");
        assert_eq!(
            err.to_string(),
            "illegal transition `fail` from state `succeeded`"
        );
    }

    #[test]
    fn full_journeys() {
        let happy = [T::Validate, T::Accept, T::Succeed];
        let end = happy
            .into_iter()
            .try_fold(S::Received, S::transition)
            .expect("legal");
        assert_eq!(end, S::Succeeded);
        let retried = [
            T::Validate,
            T::Accept,
            T::Fail,
            T::ScheduleRetry,
            T::Resume,
            T::Fail,
            T::DeadLetter,
        ];
        let end = retried
            .into_iter()
            .try_fold(S::Received, S::transition)
            .expect("legal");
        assert_eq!(end, S::Dlq);
    }

    #[test]
    fn terminal_states_and_labels() {
        let terminal: Vec<_> = DeliveryState::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(terminal, [S::Succeeded, S::Dlq]);
        for s in DeliveryState::ALL {
            let leads_on = Transition::ALL.iter().any(|t| s.transition(*t).is_ok());
            assert_eq!(leads_on, !s.is_terminal(), "{s}");
            assert!(
                s.as_str()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_')
            );
        }
        assert_eq!(S::ScheduledRetry.to_string(), "scheduled_retry");
        assert_eq!(T::DeadLetter.to_string(), "dead_letter");
    }
}
