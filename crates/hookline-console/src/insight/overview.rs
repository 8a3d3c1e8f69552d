//! The overview page's figures: deliveries per minute by status and DLQ inflow per minute
//! over the window, consumer lag and open circuits (pure folding; the reads are in
//! [`super::Insight::overview`]).

use serde::Serialize;

use super::circuits::CircuitsReport;
use super::lag::LagReport;
use super::read::ReadStats;
use super::stats::{DeliveryStatus, StatusCounts};
use super::window::{Minutes, Window};

/// One minute of the overview.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Minute {
    /// Its start, in epoch milliseconds.
    pub start_ms: i64,
    /// Attempt-log records by status in it.
    pub deliveries: StatusCounts,
    /// Records that arrived in the DLQ topic in it (by their Kafka timestamps).
    pub dlq_inflow: u64,
}

/// The overview page.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Overview {
    /// The whole minutes shown (the last one still filling).
    pub window: Window,
    /// The minutes, oldest first.
    pub minutes: Vec<Minute>,
    /// The sums over `minutes`.
    pub totals: StatusCounts,
    /// DLQ records in the window.
    pub dlq_inflow_total: u64,
    /// The dispatchers' consumer lag now.
    pub lag: LagReport,
    /// The open circuits now.
    pub circuits: CircuitsReport,
    /// What the attempt-log read went through.
    pub attempts: ReadStats,
    /// What the DLQ read went through.
    pub dlq: ReadStats,
}

/// Folds records and DLQ timestamps into per-minute counts.
#[derive(Clone, Debug)]
pub struct MinuteCounts {
    minutes: Minutes,
    rows: Vec<Minute>,
}

impl MinuteCounts {
    /// Empty counts for `minutes`.
    pub fn new(minutes: Minutes) -> Self {
        MinuteCounts {
            rows: minutes
                .starts()
                .map(|start_ms| Minute {
                    start_ms,
                    ..Minute::default()
                })
                .collect(),
            minutes,
        }
    }

    /// Counts a record of `status` written at `at_ms` (outside the minutes: ignored).
    pub fn delivery(&mut self, at_ms: i64, status: DeliveryStatus) {
        if let Some(row) = self.row(at_ms) {
            row.deliveries.add(status);
        }
    }

    /// Counts a DLQ record that arrived at `at_ms` (outside the minutes: ignored).
    pub fn dlq(&mut self, at_ms: i64) {
        if let Some(row) = self.row(at_ms) {
            row.dlq_inflow = row.dlq_inflow.saturating_add(1);
        }
    }

    fn row(&mut self, at_ms: i64) -> Option<&mut Minute> {
        let index = self.minutes.index_of(at_ms)?;
        self.rows.get_mut(index)
    }

    /// The minutes, their status totals and the DLQ total.
    pub fn finish(self) -> (Vec<Minute>, StatusCounts, u64) {
        let mut totals = StatusCounts::default();
        let mut dlq = 0_u64;
        for row in &self.rows {
            let d = row.deliveries;
            totals.succeeded = totals.succeeded.saturating_add(d.succeeded);
            totals.failed = totals.failed.saturating_add(d.failed);
            totals.retried = totals.retried.saturating_add(d.retried);
            totals.deferred = totals.deferred.saturating_add(d.deferred);
            totals.parked = totals.parked.saturating_add(d.parked);
            dlq = dlq.saturating_add(row.dlq_inflow);
        }
        (self.rows, totals, dlq)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::insight::window::MINUTE_MS;

    #[test]
    fn counts_land_in_their_minute_and_add_up() {
        let now = 100 * MINUTE_MS + 30_000;
        let mut counts = MinuteCounts::new(Minutes::last(now, Duration::from_secs(180)));
        counts.delivery(98 * MINUTE_MS, DeliveryStatus::Succeeded);
        counts.delivery(100 * MINUTE_MS + 1, DeliveryStatus::Succeeded);
        counts.delivery(100 * MINUTE_MS + 2, DeliveryStatus::Failed);
        counts.delivery(99 * MINUTE_MS + 5, DeliveryStatus::Retried);
        counts.delivery(99 * MINUTE_MS + 6, DeliveryStatus::Parked);
        counts.dlq(99 * MINUTE_MS + 7);
        // Outside: before the first minute, after the last.
        counts.delivery(98 * MINUTE_MS - 1, DeliveryStatus::Succeeded);
        counts.dlq(101 * MINUTE_MS);
        let (minutes, totals, dlq) = counts.finish();
        assert_eq!(
            minutes.iter().map(|m| m.start_ms).collect::<Vec<_>>(),
            [98 * MINUTE_MS, 99 * MINUTE_MS, 100 * MINUTE_MS]
        );
        assert_eq!(minutes[0].deliveries.succeeded, 1);
        assert_eq!(minutes[1].deliveries.retried, 1);
        assert_eq!(minutes[1].deliveries.parked, 1);
        assert_eq!(minutes[1].dlq_inflow, 1);
        assert_eq!(minutes[2].deliveries.succeeded, 1);
        assert_eq!(minutes[2].deliveries.failed, 1);
        assert_eq!(
            (
                totals.succeeded,
                totals.failed,
                totals.retried,
                totals.parked
            ),
            (2, 1, 1, 1)
        );
        assert_eq!(dlq, 1);
    }
}
