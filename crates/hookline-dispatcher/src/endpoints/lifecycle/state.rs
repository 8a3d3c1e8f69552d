//! One endpoint's lifecycle state, kept in its table entry: the clock of failures since its
//! last success, and the decision to disable it (pure: the time is passed in).

use hookline_core::classify::Classification;

use crate::settings::LifecycleSettings;

/// Why an endpoint is disabled: a low-cardinality code and what the last attempt got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DisableReason {
    /// `gone` or `failing` (the metric label).
    pub code: &'static str,
    /// The last status (`HTTP 500`) or error kind (`timeout`, `connect`); never a URL.
    pub last: String,
}

impl DisableReason {
    /// The stored `disabled_reason`: `gone: HTTP 410`, `failing: timeout`.
    pub fn text(&self) -> String {
        format!("{}: {}", self.code, self.last)
    }
}

/// The lifecycle state of one endpoint, kept across config changes that keep it.
#[derive(Debug, Default)]
pub struct LifecycleState {
    /// When the first attempt failed since the last success (epoch ms); `None`: the last
    /// attempt succeeded, or none was made.
    failing_since_ms: Option<i64>,
    /// A write-back is under way: no second one is started meanwhile.
    pub(super) disabling: bool,
}

impl LifecycleState {
    /// Since when every attempt failed, if the last one did.
    #[cfg(test)]
    pub fn failing_since_ms(&self) -> Option<i64> {
        self.failing_since_ms
    }

    /// Records the verdict on one attempt made at `now_ms`; whether the endpoint is to be
    /// disabled now. Only attempts count: a deferral (open circuit, rate limit, queue) made
    /// none and is never observed.
    pub fn observe(
        &mut self,
        verdict: &Classification,
        now_ms: i64,
        settings: &LifecycleSettings,
    ) -> Option<DisableReason> {
        let reason = match verdict {
            Classification::Success => {
                self.failing_since_ms = None;
                return None;
            }
            Classification::Retryable { reason, .. } | Classification::NonRetryable { reason } => {
                reason
            }
        };
        let since = *self.failing_since_ms.get_or_insert(now_ms);
        let last = match reason.status() {
            Some(status) => format!("HTTP {status}"),
            None => reason.code().to_owned(),
        };
        if reason.status() == Some(410) {
            return Some(DisableReason { code: "gone", last });
        }
        let after = settings.disable_after_failing?;
        let failing_ms = u128::try_from(now_ms.saturating_sub(since)).unwrap_or(0);
        (failing_ms >= after.as_millis()).then_some(DisableReason {
            code: "failing",
            last,
        })
    }
}
