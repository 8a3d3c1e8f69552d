//! What attempt-log records add up to (pure): each record's delivery status, an endpoint's
//! success ratio, latency percentiles and last error.

use hookline_core::attempt_log::{AttemptKind, AttemptRecord};
use serde::Serialize;

/// What one attempt-log record says about a delivery, for counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// An HTTP attempt that succeeded (the delivery is done).
    Succeeded,
    /// An HTTP attempt that failed (a retry or a park follows).
    Failed,
    /// After a failed attempt, written to a retry tier.
    Retried,
    /// Put off to a tier without an attempt (open circuit, rate limit, registry down...).
    Deferred,
    /// Written to the DLQ.
    Parked,
}

impl DeliveryStatus {
    /// The status a record counts as; `None` for a fan-out record (not a delivery step).
    pub fn of(record: &AttemptRecord) -> Option<DeliveryStatus> {
        match record.kind {
            AttemptKind::Attempt if record.error_kind.is_none() => Some(DeliveryStatus::Succeeded),
            AttemptKind::Attempt => Some(DeliveryStatus::Failed),
            AttemptKind::RetryScheduled => Some(DeliveryStatus::Retried),
            AttemptKind::Deferred => Some(DeliveryStatus::Deferred),
            AttemptKind::Parked => Some(DeliveryStatus::Parked),
            AttemptKind::FannedOut => None,
        }
    }
}

/// Counts by [`DeliveryStatus`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StatusCounts {
    /// Attempts that succeeded.
    pub succeeded: u64,
    /// Attempts that failed.
    pub failed: u64,
    /// Records scheduled into a retry tier after a failed attempt.
    pub retried: u64,
    /// Records put off to a tier without an attempt.
    pub deferred: u64,
    /// Records parked in the DLQ.
    pub parked: u64,
}

impl StatusCounts {
    /// Counts one more of `status`.
    pub fn add(&mut self, status: DeliveryStatus) {
        let slot = match status {
            DeliveryStatus::Succeeded => &mut self.succeeded,
            DeliveryStatus::Failed => &mut self.failed,
            DeliveryStatus::Retried => &mut self.retried,
            DeliveryStatus::Deferred => &mut self.deferred,
            DeliveryStatus::Parked => &mut self.parked,
        };
        *slot = slot.saturating_add(1);
    }
}

/// The nearest-rank `percent`-th percentile of sorted, non-empty `values`: the smallest
/// value with at least `percent`% of the values at or below it (`ceil(p/100 × n)`-th, from
/// 1), as `hookline bench` computes it. `None` when `values` is empty.
pub fn nearest_rank(sorted: &[i64], percent: u8) -> Option<i64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let index = (usize::from(percent.min(100)) * n)
        .div_ceil(100)
        .clamp(1, n)
        - 1;
    sorted.get(index).copied()
}

/// The last failed attempt of an endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LastError {
    /// When, in epoch milliseconds.
    pub at_ms: i64,
    /// The event it was for.
    pub event_id: String,
    /// The attempt's number.
    pub attempt: u32,
    /// The HTTP status, when there was an answer.
    pub http_status: Option<u16>,
    /// Its classification (`server_error`, `timeout`, `connect`...).
    pub error_kind: String,
    /// The start of the response body, bounded and with URLs redacted by the dispatcher.
    pub response_excerpt: Option<String>,
}

/// An endpoint's figures over a window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Health {
    /// HTTP attempts made.
    pub attempts: u64,
    /// Of which succeeded.
    pub succeeded: u64,
    /// Records parked in the DLQ.
    pub parked: u64,
    /// Records deferred without an attempt.
    pub deferred: u64,
    /// `succeeded / attempts`, 0 to 1; `None` without attempts.
    pub success_ratio: Option<f64>,
    /// The median attempt duration, in milliseconds.
    pub latency_p50_ms: Option<i64>,
    /// The 95th percentile attempt duration, in milliseconds.
    pub latency_p95_ms: Option<i64>,
    /// The last failed attempt.
    pub last_error: Option<LastError>,
    /// When the last record was written, in epoch milliseconds.
    pub last_seen_ms: Option<i64>,
    /// Whether the latest record is a `circuit_open` deferral (the breaker was open then).
    pub latest_is_circuit_deferral: bool,
}

/// Folds one endpoint's records into its [`Health`].
#[derive(Clone, Debug, Default)]
pub struct Tally {
    health: Health,
    durations_ms: Vec<i64>,
}

impl Tally {
    /// Adds a record of this endpoint.
    pub fn add(&mut self, record: &AttemptRecord) {
        let Some(status) = DeliveryStatus::of(record) else {
            return;
        };
        let h = &mut self.health;
        if h.last_seen_ms
            .is_none_or(|seen| record.timestamp_ms >= seen)
        {
            h.last_seen_ms = Some(record.timestamp_ms);
            h.latest_is_circuit_deferral = status == DeliveryStatus::Deferred
                && record.reason.as_deref() == Some("circuit_open");
        }
        match status {
            DeliveryStatus::Succeeded | DeliveryStatus::Failed => {
                h.attempts = h.attempts.saturating_add(1);
                if let Some(ms) = record.duration_ms {
                    self.durations_ms.push(ms.max(0));
                }
            }
            DeliveryStatus::Retried => {}
            DeliveryStatus::Deferred => h.deferred = h.deferred.saturating_add(1),
            DeliveryStatus::Parked => h.parked = h.parked.saturating_add(1),
        }
        if status == DeliveryStatus::Succeeded {
            h.succeeded = h.succeeded.saturating_add(1);
        }
        if status == DeliveryStatus::Failed
            && h.last_error
                .as_ref()
                .is_none_or(|e| record.timestamp_ms >= e.at_ms)
        {
            h.last_error = Some(LastError {
                at_ms: record.timestamp_ms,
                event_id: record.event_id.clone(),
                attempt: record.attempt,
                http_status: record.http_status,
                error_kind: record.error_kind.clone().unwrap_or_default(),
                response_excerpt: record.response_excerpt.clone(),
            });
        }
    }

    /// Whether the latest record so far is a `circuit_open` deferral.
    pub fn latest_is_circuit_deferral(&self) -> bool {
        self.health.latest_is_circuit_deferral
    }

    /// The figures so far.
    pub fn finish(mut self) -> Health {
        self.durations_ms.sort_unstable();
        let mut health = self.health;
        health.latency_p50_ms = nearest_rank(&self.durations_ms, 50);
        health.latency_p95_ms = nearest_rank(&self.durations_ms, 95);
        health.success_ratio =
            (health.attempts > 0).then(|| health.succeeded as f64 / health.attempts as f64);
        health
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: AttemptKind, at: i64) -> AttemptRecord {
        AttemptRecord {
            event_id: format!("evt-{at}"),
            tenant_id: None,
            endpoint_id: Some("ep".into()),
            kind,
            attempt: 1,
            timestamp_ms: at,
            duration_ms: None,
            http_status: None,
            error_kind: None,
            response_excerpt: None,
            tier: None,
            reason: None,
            deliveries: None,
            dispatcher_id: "d".into(),
            trace_id: None,
            published_at_ms: None,
            redriven_from: None,
        }
    }

    fn attempt(at: i64, status: u16, took: i64) -> AttemptRecord {
        AttemptRecord {
            duration_ms: Some(took),
            http_status: Some(status),
            error_kind: (status >= 300).then(|| "server_error".to_owned()),
            ..record(AttemptKind::Attempt, at)
        }
    }

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<i64> = (1..=100).collect();
        assert_eq!(nearest_rank(&values, 50), Some(50));
        assert_eq!(nearest_rank(&values, 95), Some(95));
        assert_eq!(nearest_rank(&values, 100), Some(100));
        assert_eq!(nearest_rank(&values, 0), Some(1));
        assert_eq!(nearest_rank(&[7], 95), Some(7));
        // Of 1..=10: ceil(9.5) = 10th for p95, ceil(5) = 5th for p50.
        let ten: Vec<i64> = (1..=10).collect();
        assert_eq!(nearest_rank(&ten, 95), Some(10));
        assert_eq!(nearest_rank(&ten, 50), Some(5));
        assert_eq!(nearest_rank(&[], 50), None);
    }

    #[test]
    fn every_kind_has_a_status_but_fan_out() {
        assert_eq!(
            DeliveryStatus::of(&attempt(0, 200, 1)),
            Some(DeliveryStatus::Succeeded)
        );
        assert_eq!(
            DeliveryStatus::of(&attempt(0, 500, 1)),
            Some(DeliveryStatus::Failed)
        );
        for (kind, status) in [
            (AttemptKind::RetryScheduled, Some(DeliveryStatus::Retried)),
            (AttemptKind::Deferred, Some(DeliveryStatus::Deferred)),
            (AttemptKind::Parked, Some(DeliveryStatus::Parked)),
            (AttemptKind::FannedOut, None),
        ] {
            assert_eq!(DeliveryStatus::of(&record(kind, 0)), status, "{kind:?}");
        }
        let mut counts = StatusCounts::default();
        counts.add(DeliveryStatus::Parked);
        counts.add(DeliveryStatus::Parked);
        counts.add(DeliveryStatus::Succeeded);
        assert_eq!((counts.parked, counts.succeeded, counts.failed), (2, 1, 0));
    }

    #[test]
    fn health_is_the_ratio_latency_and_last_error_of_the_attempts() {
        let mut tally = Tally::default();
        for (at, status, took) in [(1, 200, 10), (2, 500, 40), (3, 200, 20), (4, 200, 30)] {
            tally.add(&attempt(at, status, took));
        }
        // An older failure read later does not replace the newer one.
        let mut older = attempt(0, 503, 90);
        older.response_excerpt = Some("busy".into());
        tally.add(&older);
        tally.add(&AttemptRecord {
            reason: Some("max_attempts".into()),
            ..record(AttemptKind::Parked, 5)
        });
        let health = tally.finish();
        assert_eq!(health.attempts, 5);
        assert_eq!(health.succeeded, 3);
        assert_eq!(health.parked, 1);
        assert_eq!(health.success_ratio, Some(0.6));
        assert_eq!(health.latency_p50_ms, Some(30));
        assert_eq!(health.latency_p95_ms, Some(90));
        let last = health.last_error.expect("a failure");
        assert_eq!((last.at_ms, last.http_status), (2, Some(500)));
        assert_eq!(last.error_kind, "server_error");
        assert_eq!(last.event_id, "evt-2");
        assert_eq!(health.last_seen_ms, Some(5));
        assert!(!health.latest_is_circuit_deferral);
    }

    #[test]
    fn no_attempts_no_ratio_and_a_circuit_deferral_is_seen_when_latest() {
        let mut tally = Tally::default();
        tally.add(&attempt(1, 500, 5));
        tally.add(&AttemptRecord {
            reason: Some("circuit_open".into()),
            ..record(AttemptKind::Deferred, 2)
        });
        assert!(tally.latest_is_circuit_deferral());
        tally.add(&attempt(3, 200, 5));
        assert!(!tally.finish().latest_is_circuit_deferral);
        let empty = Tally::default().finish();
        assert_eq!(empty.success_ratio, None);
        assert_eq!(empty.latency_p50_ms, None);
    }
}
