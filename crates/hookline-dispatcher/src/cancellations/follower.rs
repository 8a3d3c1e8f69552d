//! The cancellations topic, followed like the endpoints topic (`crate::compacted`): read to
//! its end before deliveries start, then followed, with what is past the memory bound
//! forgotten once a minute.

use super::set::CancellationSet;
use crate::clock::now_ms;
use crate::compacted::Records;

impl Records for CancellationSet {
    const WHAT: &'static str = "cancellations";

    fn apply(&self, _partition: i32, _offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) {
        let applied = CancellationSet::apply(self, key, value, now_ms());
        tracing::debug!(?applied, "cancellations record read");
    }

    fn held(&self) -> usize {
        self.len()
    }

    fn housekeep(&self) {
        let forgotten = self.forget_old(now_ms());
        if forgotten > 0 {
            tracing::info!(forgotten, held = self.len(), "old cancellations forgotten");
        }
    }
}
