//! A page of the DLQ list, newest first: the DLQ is read oldest first partition by
//! partition, so the newest `page × size` records are kept in a bounded heap while every
//! record is counted (by reason and endpoint). Pure: no I/O.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use hookline_dlq::Selected;
use hookline_dlq::view::Summary;

/// The deepest page served: deeper than that, narrow the filter (memory stays bounded).
pub const MAX_PAGE: usize = 200;

/// Which page, of how many records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pager {
    /// 1-based page number.
    pub page: usize,
    /// Records per page.
    pub size: usize,
}

impl Pager {
    /// The page named by `text` (`1` when missing or not a number), at most [`MAX_PAGE`].
    pub fn new(text: &str, size: usize) -> Pager {
        let page = text.trim().parse::<usize>().unwrap_or(1).clamp(1, MAX_PAGE);
        Pager {
            page,
            size: size.max(1),
        }
    }

    /// How many of the newest records must be kept to show this page.
    pub fn keep(&self) -> usize {
        self.page.saturating_mul(self.size)
    }

    /// How many pages `total` records fill (at least 1).
    pub fn pages(&self, total: u64) -> usize {
        let total = usize::try_from(total).unwrap_or(usize::MAX);
        total.div_ceil(self.size).max(1)
    }
}

/// Newest first: by parked time, then place.
struct Newest(Box<Selected>);

impl Newest {
    fn key(&self) -> (i64, i32, i64) {
        let r = &self.0.record;
        (r.envelope.error_timestamp_ms, r.partition, r.offset)
    }
}

impl PartialEq for Newest {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for Newest {}
impl PartialOrd for Newest {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Newest {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// The records of a listing as they are read.
pub struct Listing {
    keep: usize,
    heap: BinaryHeap<Reverse<Newest>>,
    /// Counts of every matching record.
    pub summary: Summary,
}

impl Listing {
    /// A listing that keeps the newest `keep` records.
    pub fn new(keep: usize) -> Listing {
        Listing {
            keep,
            heap: BinaryHeap::with_capacity(keep.min(4_096) + 1),
            summary: Summary::default(),
        }
    }

    /// Counts a record, and keeps it while it is among the newest.
    pub fn add(&mut self, selected: Selected) {
        self.summary.add(&selected);
        self.heap.push(Reverse(Newest(Box::new(selected))));
        if self.heap.len() > self.keep {
            self.heap.pop();
        }
    }

    /// The records of `pager`'s page, newest first.
    pub fn page(self, pager: Pager) -> Vec<Selected> {
        let mut newest: Vec<Newest> = self.heap.into_iter().map(|Reverse(n)| n).collect();
        newest.sort_by(|a, b| b.cmp(a));
        newest
            .into_iter()
            .skip((pager.page - 1).saturating_mul(pager.size))
            .take(pager.size)
            .map(|n| *n.0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use hookline_core::envelope::{DlqEnvelope, ENVELOPE_VERSION, ErrorReason};
    use hookline_dlq::{DlqRecord, History};

    use super::*;

    pub(crate) fn selected(partition: i32, offset: i64, at_ms: i64, endpoint: &str) -> Selected {
        Selected {
            record: DlqRecord {
                partition,
                offset,
                timestamp_ms: Some(at_ms),
                key: None,
                headers: vec![],
                envelope: DlqEnvelope {
                    envelope_version: ENVELOPE_VERSION,
                    event_id: format!("evt-{partition}-{offset}"),
                    event_type: Some("invoice.paid".into()),
                    endpoint_id: Some(endpoint.into()),
                    endpoint_url: None,
                    original_topic: "ev".into(),
                    original_partition: 0,
                    original_offset: 0,
                    original_key: None,
                    original_payload_bytes: b"{}".to_vec(),
                    original_headers: vec![],
                    error_reason: ErrorReason::RetriesExhausted,
                    error_message: "HTTP 503".into(),
                    last_status_code: Some(503),
                    attempts: 1,
                    first_attempt_at_ms: None,
                    error_timestamp_ms: at_ms,
                    dispatcher_id: "d".into(),
                    original_payload_truncated: false,
                    original_payload_size: None,
                    tenant_id: None,
                },
            },
            history: History::default(),
        }
    }

    #[test]
    fn pages_are_newest_first_across_partitions_and_everything_is_counted() {
        let pager = Pager::new("2", 3);
        let mut listing = Listing::new(pager.keep());
        // Two partitions read one after the other, each oldest first.
        for (p, times) in [(0, [10, 30, 50, 70]), (1, [20, 40, 60, 80])] {
            for (i, at) in times.into_iter().enumerate() {
                let endpoint = if at % 20 == 0 { "ep-b" } else { "ep-a" };
                listing.add(selected(p, i as i64, at, endpoint));
            }
        }
        assert_eq!(listing.summary.total, 8);
        assert_eq!(listing.summary.by_endpoint.get("ep-a"), Some(&4));
        let page: Vec<i64> = listing
            .page(pager)
            .iter()
            .map(|s| s.record.envelope.error_timestamp_ms)
            .collect();
        assert_eq!(page, [50, 40, 30], "page 2 of 3: the 4th to 6th newest");
        assert_eq!(pager.pages(8), 3);
        assert_eq!(pager.pages(0), 1);
    }

    #[test]
    fn page_numbers_are_clamped() {
        assert_eq!(Pager::new("", 50).page, 1);
        assert_eq!(Pager::new("x", 50).page, 1);
        assert_eq!(Pager::new("0", 50).page, 1);
        assert_eq!(Pager::new("999999999999", 50).page, MAX_PAGE);
        let last = Pager::new("4", 3);
        let mut listing = Listing::new(last.keep());
        for i in 0..5 {
            listing.add(selected(0, i, i, "ep"));
        }
        assert!(listing.page(last).is_empty(), "past the last page");
    }
}
