//! State shared by the poll loop, the delivery tasks and the rebalance callbacks: offsets in
//! flight, partitions paused until a due time, and what `/readyz` says.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::{Offset, TopicPartitionList};

use crate::admin::Readiness;
use crate::offsets::{OffsetTracker, PartitionKey};

/// Shared dispatcher state.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    tracker: Mutex<OffsetTracker>,
    finished: Condvar,
    paused: Mutex<HashMap<PartitionKey, Instant>>,
    pub readiness: std::sync::Arc<Readiness>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    pub fn new(readiness: std::sync::Arc<Readiness>) -> Self {
        Shared {
            readiness,
            ..Shared::default()
        }
    }

    /// A delivery of `offset` starts.
    pub fn start(&self, key: &PartitionKey, offset: i64) -> usize {
        let mut tracker = lock(&self.tracker);
        tracker.start(key, offset);
        tracker.total_in_flight()
    }

    /// A delivery finished durably: store the new commit position, if it advanced.
    pub fn finish<C: Consumer<X>, X: rdkafka::consumer::ConsumerContext>(
        &self,
        consumer: &C,
        key: &PartitionKey,
        offset: i64,
    ) -> usize {
        let mut tracker = lock(&self.tracker);
        if let Some(position) = tracker.finish(key, offset) {
            let mut list = TopicPartitionList::new();
            let stored = list
                .add_partition_offset(&key.0, key.1, Offset::Offset(position))
                .and_then(|()| consumer.store_offsets(&list));
            if let Err(error) = stored {
                // The partition was revoked meanwhile; its new owner delivers it again.
                tracing::debug!(%error, topic = key.0, partition = key.1, "offset not stored");
            }
        }
        let in_flight = tracker.total_in_flight();
        drop(tracker);
        self.finished.notify_all();
        in_flight
    }

    /// A record fetched at `offset` was not due: the position must not pass it.
    pub fn rewind(&self, key: &PartitionKey, offset: i64, until: Instant) {
        lock(&self.tracker).rewind(key, offset);
        lock(&self.paused).insert(key.clone(), until);
    }

    /// Whether a partition is paused until a due time.
    pub fn is_paused(&self, key: &PartitionKey) -> bool {
        lock(&self.paused).contains_key(key)
    }

    /// The earliest due time of a paused partition.
    pub fn next_resume(&self) -> Option<Instant> {
        lock(&self.paused).values().min().copied()
    }

    /// Takes the partitions whose due time has come.
    pub fn take_due(&self, now: Instant) -> Vec<PartitionKey> {
        let mut paused = lock(&self.paused);
        let due: Vec<PartitionKey> = paused
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(key, _)| key.clone())
            .collect();
        for key in &due {
            paused.remove(key);
        }
        due
    }

    /// Waits until none of `keys` has a delivery in flight, or `deadline` passes.
    /// Returns whether they drained.
    pub fn wait_drained(&self, keys: &[PartitionKey], deadline: Duration) -> bool {
        let give_up = Instant::now() + deadline;
        let mut tracker = lock(&self.tracker);
        loop {
            if keys.iter().all(|key| tracker.in_flight(key) == 0) {
                return true;
            }
            let now = Instant::now();
            if now >= give_up {
                return false;
            }
            tracker = match self.finished.wait_timeout(tracker, give_up - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Forgets every partition: the deliveries still counted were abandoned.
    pub fn forget_all(&self) {
        *lock(&self.tracker) = OffsetTracker::default();
        lock(&self.paused).clear();
    }

    /// Partitions that are no longer ours.
    pub fn forget(&self, keys: &[PartitionKey]) {
        let mut tracker = lock(&self.tracker);
        let mut paused = lock(&self.paused);
        for key in keys {
            tracker.forget(key);
            paused.remove(key);
        }
    }
}
