//! What `/readyz` says: endpoints loaded, the consumer assigned, and fetching without
//! repeated errors; set by the poll loop and start-up, read by the admin port.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What `/readyz` reports.
#[derive(Debug, Default)]
pub struct Readiness {
    endpoints_loaded: AtomicBool,
    consuming: AtomicBool,
    /// Since when every fetch has ended in an error (none since the last good record).
    failing_since: Mutex<Option<Instant>>,
}

/// How long the consumer may keep failing, with no good record in between, before
/// `/readyz` says so.
pub const FAILING_FETCH_GRACE: Duration = Duration::from_secs(30);

impl Readiness {
    pub(crate) fn fetched(&self) {
        *self.lock_failing() = None;
    }

    pub(crate) fn consumer_error(&self) {
        self.lock_failing().get_or_insert_with(Instant::now);
    }

    fn lock_failing(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.failing_since
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Why the dispatcher is not ready, if it is not.
    pub fn not_ready_because(&self) -> Option<&'static str> {
        if !self.endpoints_loaded.load(Ordering::Acquire) {
            return Some("endpoints not loaded");
        }
        if !self.consuming.load(Ordering::Acquire) {
            return Some("no partitions assigned");
        }
        let failing = *self.lock_failing();
        if failing.is_some_and(|since| since.elapsed() > FAILING_FETCH_GRACE) {
            return Some("the consumer keeps failing to fetch (see webhook_consumer_errors_total)");
        }
        None
    }

    pub(crate) fn set_endpoints_loaded(&self) {
        self.endpoints_loaded.store(true, Ordering::Release);
    }

    pub(crate) fn set_consuming(&self, consuming: bool) {
        self.consuming.store(consuming, Ordering::Release);
    }

    /// Whether the dispatcher is delivering.
    pub fn is_ready(&self) -> bool {
        self.not_ready_because().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_says_why_and_repeated_fetch_errors_make_it_unready() {
        let readiness = Readiness::default();
        assert_eq!(readiness.not_ready_because(), Some("endpoints not loaded"));
        readiness.set_endpoints_loaded();
        assert_eq!(
            readiness.not_ready_because(),
            Some("no partitions assigned")
        );
        readiness.set_consuming(true);
        assert!(readiness.is_ready());
        readiness.consumer_error();
        assert!(readiness.is_ready(), "one error is not a failing consumer");
        *readiness.lock_failing() = Instant::now().checked_sub(FAILING_FETCH_GRACE * 2);
        assert!(
            !readiness.is_ready(),
            "errors and no good record for a while"
        );
        readiness.fetched();
        assert!(readiness.is_ready(), "a good record clears it");
    }
}
