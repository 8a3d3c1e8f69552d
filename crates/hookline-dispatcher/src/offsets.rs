//! Which offsets may be committed: the highest contiguous finished offset per partition,
//! whatever order deliveries finish in; and how far each partition's uncommitted window
//! reaches, and since when its oldest record holds it.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::fast::FastMap;

/// A topic and partition.
pub type PartitionKey = (std::sync::Arc<str>, i32);

/// Tracks offsets handed to deliveries and finished by them, per partition.
#[derive(Debug, Default)]
pub struct OffsetTracker {
    partitions: FastMap<PartitionKey, PartitionOffsets>,
}

#[derive(Debug, Default)]
struct PartitionOffsets {
    /// Offsets started and not finished yet, with when they started.
    in_flight: BTreeMap<i64, Instant>,
    /// One past the highest offset started (the next position when nothing is in flight).
    next: Option<i64>,
    /// The position last handed out for commit, so callers store only advances.
    committed: Option<i64>,
}

impl OffsetTracker {
    /// Records that the delivery of `offset` started.
    pub fn start(&mut self, key: &PartitionKey, offset: i64, now: Instant) {
        let partition = self.partitions.entry(key.clone()).or_default();
        partition.in_flight.insert(offset, now);
        // The first offset seen is where this consumer started: nothing to commit below it.
        partition.committed.get_or_insert(offset);
        partition.next = Some(partition.next.map_or(offset.saturating_add(1), |next| {
            next.max(offset.saturating_add(1))
        }));
    }

    /// Records that the delivery of `offset` finished durably. Returns the new commit position
    /// (the next offset to consume) when it advanced.
    pub fn finish(&mut self, key: &PartitionKey, offset: i64) -> Option<i64> {
        let partition = self.partitions.get_mut(key)?;
        partition.in_flight.remove(&offset)?;
        let position = partition
            .in_flight
            .first_key_value()
            .map(|(offset, _)| *offset)
            .or(partition.next)?;
        if partition
            .committed
            .is_some_and(|committed| committed >= position)
        {
            return None;
        }
        partition.committed = Some(position);
        Some(position)
    }

    /// Forgets where a partition's consumption was heading: the record at `offset` will be
    /// fetched again (it was not due yet), so the next position is at most `offset`.
    pub fn rewind(&mut self, key: &PartitionKey, offset: i64) {
        if let Some(partition) = self.partitions.get_mut(key) {
            partition.next = Some(partition.next.map_or(offset, |next| next.min(offset)));
        }
    }

    /// How many records lie between the commit position and `offset` (taking `offset` would
    /// make the uncommitted window this long).
    pub fn window(&self, key: &PartitionKey, offset: i64) -> i64 {
        self.partitions
            .get(key)
            .and_then(|partition| partition.committed)
            .map_or(0, |committed| offset.saturating_sub(committed))
    }

    /// The oldest record in flight in each partition, with when it started.
    pub fn oldest(&self) -> impl Iterator<Item = (&PartitionKey, i64, Instant)> {
        self.partitions.iter().filter_map(|(key, partition)| {
            let (offset, started) = partition.in_flight.first_key_value()?;
            Some((key, *offset, *started))
        })
    }

    /// One past the highest offset taken (or the offset rewound to).
    pub fn next(&self, key: &PartitionKey) -> Option<i64> {
        self.partitions
            .get(key)
            .and_then(|partition| partition.next)
    }

    /// How many deliveries of this partition are still running.
    pub fn in_flight(&self, key: &PartitionKey) -> usize {
        self.partitions
            .get(key)
            .map_or(0, |partition| partition.in_flight.len())
    }

    /// How many deliveries are running over all partitions.
    pub fn total_in_flight(&self) -> usize {
        self.partitions
            .values()
            .map(|partition| partition.in_flight.len())
            .sum()
    }

    /// Drops a partition that is no longer ours (revoked); late finishes are then ignored.
    pub fn forget(&mut self, key: &PartitionKey) {
        self.partitions.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> PartitionKey {
        ("events".into(), 0)
    }

    #[test]
    fn commits_only_the_contiguous_prefix() {
        let mut tracker = OffsetTracker::default();
        for offset in 10..15 {
            tracker.start(&key(), offset, Instant::now());
        }
        assert_eq!(
            tracker.finish(&key(), 12),
            None,
            "10 and 11 are still running"
        );
        assert_eq!(tracker.finish(&key(), 11), None);
        assert_eq!(
            tracker.finish(&key(), 10),
            Some(13),
            "10..=12 done: next is 13"
        );
        assert_eq!(tracker.finish(&key(), 14), None, "13 still running");
        assert_eq!(tracker.finish(&key(), 13), Some(15));
        assert_eq!(tracker.in_flight(&key()), 0);
    }

    #[test]
    fn a_rewound_record_holds_the_position_back() {
        let mut tracker = OffsetTracker::default();
        tracker.start(&key(), 0, Instant::now());
        tracker.start(&key(), 1, Instant::now());
        // Offset 2 was fetched but not due: the partition is rewound to it.
        tracker.rewind(&key(), 2);
        assert_eq!(tracker.finish(&key(), 1), None);
        assert_eq!(
            tracker.finish(&key(), 0),
            Some(2),
            "never past the record not yet due"
        );
        tracker.start(&key(), 2, Instant::now());
        assert_eq!(tracker.finish(&key(), 2), Some(3));
    }

    #[test]
    fn finishes_of_unknown_or_forgotten_offsets_are_ignored() {
        let mut tracker = OffsetTracker::default();
        tracker.start(&key(), 5, Instant::now());
        assert_eq!(tracker.finish(&key(), 4), None);
        tracker.forget(&key());
        assert_eq!(tracker.finish(&key(), 5), None);
        assert_eq!(tracker.total_in_flight(), 0);
    }

    #[test]
    fn the_window_counts_from_the_commit_position_and_the_oldest_holds_it() {
        let mut tracker = OffsetTracker::default();
        let first = Instant::now();
        tracker.start(&key(), 100, first);
        for offset in 101..110 {
            tracker.start(&key(), offset, Instant::now());
        }
        assert_eq!(tracker.window(&key(), 110), 10);
        for offset in 101..110 {
            assert_eq!(
                tracker.finish(&key(), offset),
                None,
                "100 holds the position"
            );
        }
        assert_eq!(tracker.window(&key(), 110), 10, "still held by 100");
        let oldest: Vec<_> = tracker.oldest().map(|(_, o, at)| (o, at)).collect();
        assert_eq!(oldest, [(100, first)]);
        assert_eq!(tracker.finish(&key(), 100), Some(110));
        assert_eq!(tracker.window(&key(), 110), 0);
        assert_eq!(tracker.window(&("other".into(), 0), 5), 0);
    }
}
