//! What a partition's deliveries are told by the poll loop and the rebalance callbacks: to
//! stop (revoked, or the shutdown grace over), or to move on to a tier (the record holding
//! the partition's commit position too long).

use std::sync::atomic::{AtomicI64, Ordering};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// What a partition's deliveries are told, shared by them (one `Arc` clone per delivery:
/// nothing is allocated, and no lock taken, for a delivery's own signals).
#[derive(Debug)]
pub(crate) struct PartitionSignals {
    /// Cancelled when the partition is revoked and did not drain in time, or when the
    /// shutdown grace period is over (a child of the dispatcher's abandon token).
    pub cancel: CancellationToken,
    /// Every record in flight at or below this offset is to move on to a tier: it has held
    /// the partition's commit position too long (only the oldest in flight is ever told).
    move_on_through: AtomicI64,
    /// Woken when `move_on_through` rises.
    moved_on: Notify,
}

impl PartitionSignals {
    pub(crate) fn new(cancel: CancellationToken) -> Self {
        PartitionSignals {
            cancel,
            move_on_through: AtomicI64::new(i64::MIN),
            moved_on: Notify::new(),
        }
    }

    /// Tells the record at `offset` to move on; false when it had been told already.
    pub(crate) fn tell_to_move_on(&self, offset: i64) -> bool {
        if self.move_on_through.fetch_max(offset, Ordering::SeqCst) >= offset {
            return false;
        }
        self.moved_on.notify_waiters();
        true
    }

    /// Whether the record at `offset` has been told to move on.
    pub fn told_to_move_on(&self, offset: i64) -> bool {
        self.move_on_through.load(Ordering::SeqCst) >= offset
    }

    /// Returns once the record at `offset` is told to move on.
    pub async fn moved_on(&self, offset: i64) {
        loop {
            let notified = self.moved_on.notified();
            tokio::pin!(notified);
            // Registered before the check: a rise between the two still wakes it.
            notified.as_mut().enable();
            if self.told_to_move_on(offset) {
                return;
            }
            notified.await;
        }
    }
}
