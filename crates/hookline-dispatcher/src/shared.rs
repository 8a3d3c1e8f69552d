//! State shared by the poll loop, the delivery tasks and the rebalance callbacks: offsets in
//! flight, partitions paused (and why), what each partition's deliveries are told (to stop,
//! to move on to a tier), and what `/readyz` says.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdkafka::consumer::{Consumer, ConsumerContext};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::fast::FastMap;
use crate::offsets::{OffsetTracker, PartitionKey};
use crate::readiness::Readiness;
use crate::signals::PartitionSignals;

/// Why a partition is paused; every cause has the code that ends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Pause {
    /// Its head record is not due until then (the time it is resumed at).
    Until(Instant),
    /// Its uncommitted window is full: resumed once the commit position moves on.
    WindowFull,
    /// A strict-ordering endpoint's chain on it is full: resumed once the chain shortens.
    ChainFull(String),
    /// A fast endpoint's queue is full: resumed once it has room, or the endpoint is slow.
    QueueFull(String),
    /// Every place of records waiting in memory for their turn is taken (a slow-lane
    /// partition): resumed once half are free.
    LaneFull,
}

impl Pause {
    /// A metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Pause::Until(_) => "not_due",
            Pause::WindowFull => "window_full",
            Pause::ChainFull(_) => "chain_full",
            Pause::QueueFull(_) => "queue_full",
            Pause::LaneFull => "lane_full",
        }
    }
}

/// Shared dispatcher state.
#[derive(Debug)]
pub(crate) struct Shared {
    tracker: Mutex<OffsetTracker>,
    finished: Condvar,
    /// Threads in [`Shared::wait_drained`]: a finish wakes `finished` only when one waits
    /// (a notify is a system call, and there is one finish per delivery).
    drainers: AtomicUsize,
    /// Woken when a delivery finishes, so the poll loop re-checks capacity pauses.
    pub progress: Notify,
    paused: Mutex<FastMap<PartitionKey, Pause>>,
    /// Each partition's signals, shared by its deliveries.
    signals: Mutex<FastMap<PartitionKey, Arc<PartitionSignals>>>,
    /// The parent of every partition's token: cancelled when shutdown's grace is over.
    abandon: CancellationToken,
    pub readiness: Arc<Readiness>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    pub fn new(readiness: Arc<Readiness>, abandon: CancellationToken) -> Self {
        Shared {
            tracker: Mutex::default(),
            finished: Condvar::new(),
            drainers: AtomicUsize::new(0),
            progress: Notify::new(),
            paused: Mutex::default(),
            signals: Mutex::default(),
            abandon,
            readiness,
        }
    }

    /// A delivery of `offset` starts: returns its partition's signals and the deliveries now
    /// in flight.
    pub fn start(&self, key: &PartitionKey, offset: i64) -> (Arc<PartitionSignals>, usize) {
        let mut tracker = lock(&self.tracker);
        tracker.start(key, offset, Instant::now());
        let in_flight = tracker.total_in_flight();
        drop(tracker);
        let mut signals = lock(&self.signals);
        // Looked up by reference: the key is copied only for a partition's first delivery.
        let of_partition = match signals.get(key) {
            Some(of_partition) => Arc::clone(of_partition),
            None => {
                let of_partition = Arc::new(PartitionSignals::new(self.abandon.child_token()));
                signals.insert(key.clone(), Arc::clone(&of_partition));
                of_partition
            }
        };
        (of_partition, in_flight)
    }

    /// A delivery finished durably: store the new commit position, if it advanced.
    pub fn finish<C: Consumer<X>, X: ConsumerContext>(
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
                tracing::debug!(%error, topic = &*key.0, partition = key.1, "offset not stored");
            }
        }
        let in_flight = tracker.total_in_flight();
        drop(tracker);
        // A drainer counts itself under the tracker's lock before it checks and waits, so
        // one that missed this finish's change is counted here.
        if self.drainers.load(Ordering::SeqCst) > 0 {
            self.finished.notify_all();
        }
        self.progress.notify_one();
        in_flight
    }

    /// Whether taking `offset` would make the partition's uncommitted window longer than
    /// `max` records.
    pub fn window_full(&self, key: &PartitionKey, offset: i64, max: i64) -> bool {
        lock(&self.tracker).window(key, offset) >= max
    }

    /// Tells every record that has held its partition's commit position for longer than
    /// `hold` to move on to a tier. Returns how many were told.
    pub fn move_on_older_than(&self, hold: Duration, now: Instant) -> usize {
        let held: Vec<(PartitionKey, i64)> = lock(&self.tracker)
            .oldest()
            .filter(|(_, _, started)| now.saturating_duration_since(*started) > hold)
            .map(|(key, offset, _)| (key.clone(), offset))
            .collect();
        let signals = lock(&self.signals);
        held.into_iter()
            .filter(|(key, offset)| {
                signals
                    .get(key)
                    .is_some_and(|of_partition| of_partition.tell_to_move_on(*offset))
            })
            .count()
    }

    /// A record fetched at `offset` was not taken: the position must not pass it, and the
    /// partition stays paused for `pause`.
    pub fn pause(&self, key: &PartitionKey, offset: i64, pause: Pause) {
        lock(&self.tracker).rewind(key, offset);
        lock(&self.paused).insert(key.clone(), pause);
    }

    /// Whether a partition is paused.
    pub fn is_paused(&self, key: &PartitionKey) -> bool {
        lock(&self.paused).contains_key(key)
    }

    /// The earliest due time of a partition paused until one.
    pub fn next_resume(&self) -> Option<Instant> {
        lock(&self.paused)
            .values()
            .filter_map(|pause| match pause {
                Pause::Until(at) => Some(*at),
                _ => None,
            })
            .min()
    }

    /// Whether some partition waits for deliveries to finish (not for a time).
    pub fn has_capacity_pauses(&self) -> bool {
        lock(&self.paused)
            .values()
            .any(|pause| !matches!(pause, Pause::Until(_)))
    }

    /// Takes the partitions that may be resumed: due ones, windows that shrank below half
    /// of `max_window`, and those waiting for capacity that `may_go_on` lets go.
    pub fn take_resumable(
        &self,
        now: Instant,
        max_window: i64,
        may_go_on: impl Fn(&PartitionKey, &Pause) -> bool,
    ) -> Vec<PartitionKey> {
        let tracker = lock(&self.tracker);
        let mut paused = lock(&self.paused);
        let ready: Vec<PartitionKey> = paused
            .iter()
            .filter(|(key, pause)| match pause {
                Pause::Until(at) => *at <= now,
                // The record it stopped at is where the next fetch starts (rewound).
                Pause::WindowFull => {
                    tracker.window(key, tracker_next(&tracker, key)) < max_window / 2
                }
                Pause::ChainFull(_) | Pause::QueueFull(_) | Pause::LaneFull => {
                    may_go_on(key, pause)
                }
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in &ready {
            paused.remove(key);
        }
        ready
    }

    /// How many partitions are paused, by cause label.
    pub fn paused_counts(&self) -> [(&'static str, usize); 5] {
        let paused = lock(&self.paused);
        let count = |label| paused.values().filter(|p| p.label() == label).count();
        [
            "not_due",
            "window_full",
            "chain_full",
            "queue_full",
            "lane_full",
        ]
        .map(|label| (label, count(label)))
    }

    /// Waits until none of `keys` has a delivery in flight, or `deadline` passes.
    /// Returns whether they drained.
    pub fn wait_drained(&self, keys: &[PartitionKey], deadline: Duration) -> bool {
        let give_up = Instant::now() + deadline;
        let mut tracker = lock(&self.tracker);
        self.drainers.fetch_add(1, Ordering::SeqCst);
        let drained = loop {
            if keys.iter().all(|key| tracker.in_flight(key) == 0) {
                break true;
            }
            let now = Instant::now();
            if now >= give_up {
                break false;
            }
            tracker = match self.finished.wait_timeout(tracker, give_up - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        };
        self.drainers.fetch_sub(1, Ordering::SeqCst);
        drained
    }

    /// Partitions that are no longer ours: their deliveries still running are cancelled
    /// (they did not drain in time; whoever owns the partition now delivers them again),
    /// and their offsets, pauses and tokens are forgotten.
    pub fn forget(&self, keys: &[PartitionKey]) {
        let mut signals = lock(&self.signals);
        for key in keys {
            if let Some(of_partition) = signals.remove(key) {
                of_partition.cancel.cancel();
            }
        }
        drop(signals);
        let mut tracker = lock(&self.tracker);
        let mut paused = lock(&self.paused);
        for key in keys {
            tracker.forget(key);
            paused.remove(key);
        }
        drop((tracker, paused));
    }

    /// Forgets every partition: the deliveries still counted were abandoned.
    pub fn forget_all(&self) {
        let keys: Vec<PartitionKey> = lock(&self.signals).keys().cloned().collect();
        self.forget(&keys);
        *lock(&self.tracker) = OffsetTracker::default();
        lock(&self.paused).clear();
    }
}

/// Where a rewound partition's next fetch starts (its tracked next position).
fn tracker_next(tracker: &OffsetTracker, key: &PartitionKey) -> i64 {
    tracker.next(key).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(partition: i32) -> PartitionKey {
        ("events".into(), partition)
    }

    fn shared() -> Shared {
        Shared::new(Arc::new(Readiness::default()), CancellationToken::new())
    }

    #[test]
    fn revoking_a_partition_cancels_its_deliveries_and_only_its_own() {
        let shared = shared();
        let (revoked, _) = shared.start(&key(0), 10);
        let (kept, _) = shared.start(&key(1), 10);
        shared.forget(&[key(0)]);
        assert!(
            revoked.cancel.is_cancelled(),
            "a delivery that did not drain stops"
        );
        assert!(!kept.cancel.is_cancelled());
        let (again, _) = shared.start(&key(0), 11);
        assert!(
            !again.cancel.is_cancelled(),
            "a partition assigned again starts afresh"
        );
    }

    #[test]
    fn the_end_of_the_grace_period_cancels_every_partition() {
        let abandon = CancellationToken::new();
        let shared = Shared::new(Arc::new(Readiness::default()), abandon.clone());
        let (first, _) = shared.start(&key(0), 1);
        let (second, _) = shared.start(&key(1), 1);
        abandon.cancel();
        assert!(first.cancel.is_cancelled() && second.cancel.is_cancelled());
    }

    #[test]
    fn only_the_record_holding_the_commit_too_long_is_told_to_move_on() {
        let shared = shared();
        let (signals, _) = shared.start(&key(0), 5);
        shared.start(&key(0), 6);
        let later = Instant::now() + Duration::from_secs(61);
        assert_eq!(
            shared.move_on_older_than(Duration::from_secs(60), Instant::now()),
            0
        );
        assert_eq!(shared.move_on_older_than(Duration::from_secs(60), later), 1);
        assert!(signals.told_to_move_on(5));
        assert!(
            !signals.told_to_move_on(6),
            "it does not hold the commit position"
        );
        assert_eq!(
            shared.move_on_older_than(Duration::from_secs(60), later),
            0,
            "told once"
        );
    }

    #[tokio::test]
    async fn a_record_waiting_is_woken_when_it_is_told_to_move_on() {
        let shared = shared();
        let (signals, _) = shared.start(&key(0), 5);
        let waiting = tokio::spawn({
            let signals = Arc::clone(&signals);
            async move { signals.moved_on(5).await }
        });
        // The test's runtime has one thread: the yield lets the task start waiting, so the
        // order below must wake it (a record told before it waits returns without a wake).
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "not told yet");
        let later = Instant::now() + Duration::from_secs(61);
        assert_eq!(shared.move_on_older_than(Duration::from_secs(60), later), 1);
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("woken by the order to move on")
            .expect("the waiting task");
    }

    #[test]
    fn a_drain_wakes_when_the_last_delivery_finishes() {
        let consumer: rdkafka::consumer::BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("group.id", "drain-test")
            .create()
            .expect("a consumer that never connects");
        let shared = Arc::new(shared());
        shared.start(&key(0), 7);
        let waiter = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || shared.wait_drained(&[key(0)], Duration::from_secs(60)))
        };
        let counted_by = Instant::now() + Duration::from_secs(10);
        while shared.drainers.load(Ordering::SeqCst) == 0 {
            assert!(
                Instant::now() < counted_by,
                "the drainer never counted itself"
            );
            std::thread::yield_now();
        }
        let finished_at = Instant::now();
        shared.finish(&consumer, &key(0), 7);
        assert!(waiter.join().expect("the drainer"));
        assert!(
            finished_at.elapsed() < Duration::from_secs(30),
            "woken by the finish, not by its deadline"
        );
        assert_eq!(shared.drainers.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn pauses_end_by_their_own_cause() {
        let shared = shared();
        let now = Instant::now();
        shared.pause(&key(0), 0, Pause::Until(now + Duration::from_secs(1)));
        shared.pause(&key(1), 0, Pause::WindowFull);
        shared.pause(&key(2), 0, Pause::ChainFull("ep".to_owned()));
        assert_eq!(shared.next_resume(), Some(now + Duration::from_secs(1)));
        assert!(shared.has_capacity_pauses());
        // Nothing in flight on partitions 1 and 2: the window is empty; the chain is full.
        let keys = |mut ready: Vec<PartitionKey>| {
            ready.sort();
            ready
        };
        assert_eq!(keys(shared.take_resumable(now, 10, |_, _| false)), [key(1)]);
        let later = now + Duration::from_secs(1);
        assert_eq!(
            keys(shared.take_resumable(later, 10, |_, _| true)),
            [key(0), key(2)]
        );
        assert!(!shared.has_capacity_pauses());
        assert_eq!(shared.next_resume(), None);
    }

    #[test]
    fn a_full_window_stays_paused_until_the_commit_moves_on() {
        let shared = shared();
        for offset in 0..10 {
            shared.start(&key(0), offset);
        }
        assert!(shared.window_full(&key(0), 10, 10));
        shared.pause(&key(0), 10, Pause::WindowFull);
        assert!(
            shared
                .take_resumable(Instant::now(), 10, |_, _| true)
                .is_empty()
        );
    }
}
