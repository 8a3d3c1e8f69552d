//! The cancellations a dispatcher knows, in memory and bounded: filled from the
//! cancellations topic, asked before each attempt.

use std::collections::HashMap;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use hookline_core::cancellation::{Cancellation, cancellation_key};

/// One cancellation held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Held {
    /// When it was cancelled, epoch milliseconds.
    pub cancelled_at_ms: i64,
    /// Whether it cancels every delivery of the event (no endpoint named).
    pub whole_event: bool,
    /// The operator's reason.
    pub reason: Option<String>,
    /// Who cancelled.
    pub cancelled_by: Option<String>,
}

/// What one record of the topic did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Applied {
    /// A cancellation is held (new or replaced).
    Cancelled,
    /// A tombstone withdrew the cancellation of its key (if there was one).
    Withdrawn,
    /// Older than the memory bound: not held.
    TooOld,
    /// Unreadable (key or value): ignored.
    Refused,
}

/// The cancellations held, keyed as the topic is (`EVENT_ID` or `EVENT_ID/ENDPOINT_ID`).
pub(crate) struct CancellationSet {
    entries: RwLock<HashMap<String, Held>>,
    forget_after_ms: i64,
    max_entries: usize,
}

impl CancellationSet {
    /// An empty set that forgets a cancellation `forget_after` after its time and holds at
    /// most `max_entries` (the oldest forgotten first).
    pub fn new(forget_after: Duration, max_entries: usize) -> Self {
        CancellationSet {
            entries: RwLock::new(HashMap::new()),
            forget_after_ms: i64::try_from(forget_after.as_millis()).unwrap_or(i64::MAX),
            max_entries: max_entries.max(1),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<String, Held>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<String, Held>> {
        self.entries.write().unwrap_or_else(|p| p.into_inner())
    }

    /// How many are held.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Applies one record of the cancellations topic at `now_ms`: a value cancels, a
    /// tombstone withdraws. A record whose key is not UTF-8, whose value is not a valid
    /// cancellation, or whose value names another key than its own is ignored.
    pub fn apply(&self, key: Option<&[u8]>, value: Option<&[u8]>, now_ms: i64) -> Applied {
        let Some(key) = key.and_then(|key| std::str::from_utf8(key).ok()) else {
            tracing::warn!("skipping a cancellations record without a UTF-8 key");
            return Applied::Refused;
        };
        let Some(value) = value else {
            self.write().remove(key);
            return Applied::Withdrawn;
        };
        let cancellation = match Cancellation::from_record(key.as_bytes(), value) {
            Ok(cancellation) => cancellation,
            Err(error) => {
                tracing::warn!(%error, "skipping an unreadable cancellations record");
                return Applied::Refused;
            }
        };
        if cancellation.cancelled_at_ms < now_ms.saturating_sub(self.forget_after_ms) {
            return Applied::TooOld;
        }
        let held = Held {
            cancelled_at_ms: cancellation.cancelled_at_ms,
            whole_event: cancellation.endpoint_id.is_none(),
            reason: cancellation.reason,
            cancelled_by: cancellation.cancelled_by,
        };
        let mut entries = self.write();
        entries.insert(key.to_owned(), held);
        if entries.len() > self.max_entries {
            self.forget_old_locked(&mut entries, now_ms);
        }
        Applied::Cancelled
    }

    /// The cancellation that stops the delivery of `event_id` to `endpoint_id`: the one of
    /// that delivery, else the one of the whole event (only that one without an endpoint).
    pub fn lookup(&self, event_id: &str, endpoint_id: Option<&str>) -> Option<Held> {
        let entries = self.read();
        if entries.is_empty() {
            return None;
        }
        endpoint_id
            .and_then(|endpoint| entries.get(&cancellation_key(event_id, Some(endpoint))))
            .or_else(|| entries.get(&cancellation_key(event_id, None)))
            .cloned()
    }

    /// Forgets what is older than the bound at `now_ms`; returns how many.
    pub fn forget_old(&self, now_ms: i64) -> usize {
        self.forget_old_locked(&mut self.write(), now_ms)
    }

    fn forget_old_locked(&self, entries: &mut HashMap<String, Held>, now_ms: i64) -> usize {
        let before = entries.len();
        let horizon = now_ms.saturating_sub(self.forget_after_ms);
        entries.retain(|_, held| held.cancelled_at_ms >= horizon);
        if entries.len() > self.max_entries {
            // Still over: the oldest go first, down to nine tenths of the bound so that
            // this does not run on every insert.
            let keep = self.max_entries - self.max_entries / 10;
            let mut by_age: Vec<(i64, String)> = entries
                .iter()
                .map(|(key, held)| (held.cancelled_at_ms, key.clone()))
                .collect();
            by_age.sort_unstable();
            let excess = by_age.len().saturating_sub(keep);
            for (_, key) in by_age.into_iter().take(excess) {
                entries.remove(&key);
            }
        }
        before - entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_764_583_200_000;
    const DAY: Duration = Duration::from_secs(86_400);

    fn record(event: &str, endpoint: Option<&str>, at: i64) -> (String, Vec<u8>) {
        let c = Cancellation {
            event_id: event.into(),
            endpoint_id: endpoint.map(str::to_owned),
            reason: Some("refunded".into()),
            cancelled_at_ms: at,
            cancelled_by: None,
        };
        (c.key(), c.to_json())
    }

    fn apply(set: &CancellationSet, event: &str, endpoint: Option<&str>, at: i64) -> Applied {
        let (key, value) = record(event, endpoint, at);
        set.apply(Some(key.as_bytes()), Some(&value), NOW)
    }

    #[test]
    fn an_event_cancels_every_delivery_an_endpoint_one() {
        let set = CancellationSet::new(DAY, 100);
        assert_eq!(apply(&set, "evt_1", None, NOW), Applied::Cancelled);
        assert_eq!(apply(&set, "evt_2", Some("ep-a"), NOW), Applied::Cancelled);
        let whole = set.lookup("evt_1", Some("ep-any")).expect("cancelled");
        assert!(whole.whole_event);
        assert_eq!(whole.reason.as_deref(), Some("refunded"));
        assert!(
            set.lookup("evt_2", Some("ep-a"))
                .is_some_and(|h| !h.whole_event)
        );
        assert_eq!(
            set.lookup("evt_2", None),
            None,
            "one delivery is not the whole event"
        );
        assert!(set.lookup("evt_1", None).is_some_and(|h| h.whole_event));
        assert_eq!(set.lookup("evt_2", Some("ep-b")), None);
        assert_eq!(set.lookup("evt_3", Some("ep-a")), None);
        // `a/b` the event is not event `a` to endpoint `b`.
        assert_eq!(apply(&set, "a/b", None, NOW), Applied::Cancelled);
        assert_eq!(set.lookup("a", Some("b")), None);
        assert!(set.lookup("a/b", Some("c")).is_some());
    }

    #[test]
    fn a_tombstone_withdraws_and_bad_records_are_ignored() {
        let set = CancellationSet::new(DAY, 100);
        apply(&set, "evt_1", None, NOW);
        assert_eq!(set.apply(Some(b"evt_1"), None, NOW), Applied::Withdrawn);
        assert_eq!(set.lookup("evt_1", Some("ep")), None);
        let (_, value) = record("evt_1", Some("ep"), NOW);
        // A value under another key than its own, bytes that are not JSON, a key that is
        // not UTF-8: ignored, nothing held.
        assert_eq!(
            set.apply(Some(b"evt_1"), Some(&value), NOW),
            Applied::Refused
        );
        assert_eq!(
            set.apply(Some(b"evt_1"), Some(b"\xff"), NOW),
            Applied::Refused
        );
        assert_eq!(
            set.apply(Some(b"\xff"), Some(&value), NOW),
            Applied::Refused
        );
        assert_eq!(set.apply(None, Some(&value), NOW), Applied::Refused);
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn memory_is_bounded_by_age_and_count() {
        let set = CancellationSet::new(DAY, 10);
        let day_ms = 86_400_000;
        assert_eq!(apply(&set, "old", None, NOW - day_ms - 1), Applied::TooOld);
        apply(&set, "recent", None, NOW - day_ms + 1_000);
        assert_eq!(set.forget_old(NOW + 2_000), 1);
        assert_eq!(set.lookup("recent", Some("ep")), None);
        for i in 0..11 {
            apply(&set, &format!("e{i}"), None, NOW + i);
        }
        assert!(set.len() <= 10, "{}", set.len());
        assert_eq!(set.lookup("e0", Some("ep")), None, "the oldest went first");
        assert!(set.lookup("e10", Some("ep")).is_some());
    }

    proptest::proptest! {
        /// Records of any key and value never panic the set, and it never holds more than
        /// its bound.
        #[test]
        fn any_records(
            records in proptest::collection::vec(
                (proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12)),
                 proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)),
                 proptest::prelude::any::<i64>()),
                1..30,
            ),
        ) {
            let set = CancellationSet::new(DAY, 5);
            for (key, value, now) in &records {
                set.apply(key.as_deref(), value.as_deref(), *now);
                let (k, v) = record("e", None, *now);
                set.apply(Some(k.as_bytes()), Some(&v), *now);
                proptest::prop_assert!(set.len() <= 5);
                let _ = set.lookup("e", Some("ep"));
            }
        }
    }
}
