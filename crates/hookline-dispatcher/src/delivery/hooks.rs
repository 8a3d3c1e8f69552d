//! What the delivery stage tells the features that read a delivery's [`Job`]: the attempt
//! log's record of where the delivery went, and the operator's `delivery.parked` notice.
//! Built here, so that the attempt log and the operator webhooks need not know the stage.

use hookline_core::attempt_log::AttemptKind;

use super::job::Job;
use crate::attempts::AttemptLog;
use crate::attempts::hooks::{base, provenance, trace_of};
use crate::clock::now_ms;
use crate::envelope::Failure;
use crate::events::Outcome;
use crate::operator::{Notice, Operator, Parked};
use crate::record::SourceRecord;

/// Logs where a delivery went after its attempts: a retry tier, a deferral, the DLQ.
/// Deliveries (the attempt record says it), duplicates and hops are not logged. The record
/// is dated `decided_ms`, when the delivery's way was decided, not when it was written.
pub(crate) fn outcome(
    log: &AttemptLog,
    job: &Job<'_>,
    source: &SourceRecord,
    outcome: &Outcome,
    decided_ms: i64,
) {
    if !log.enabled() {
        return;
    }
    let (kind, tier, reason) = match outcome {
        Outcome::Delivered { .. } | Outcome::DuplicateSuppressed | Outcome::Hopped { .. } => {
            return;
        }
        Outcome::RetryScheduled { tier, reason, .. } => {
            (AttemptKind::RetryScheduled, Some(tier.clone()), *reason)
        }
        Outcome::Deferred { tier, why } => (AttemptKind::Deferred, Some(tier.clone()), *why),
        Outcome::Parked { reason, .. } => (AttemptKind::Parked, None, reason.code()),
    };
    let mut record = base(log, job.event_id(), kind, job.meta.attempt);
    record.timestamp_ms = decided_ms;
    record.tenant_id = job.event.as_ref().and_then(|e| e.tenant_id.clone());
    record.endpoint_id = job.endpoint_id(source);
    record.tier = tier;
    record.reason = Some(reason.to_owned());
    record.trace_id = trace_of(source);
    provenance(&mut record, source);
    log.push(record);
}

/// A delivery was written to `dlq_topic` at `partition`/`offset`.
pub(crate) fn parked(
    operator: &Operator,
    job: &Job<'_>,
    source: &SourceRecord,
    failure: &Failure,
    dlq_topic: &str,
    (partition, offset): (i32, i64),
) {
    if !operator.is_on() {
        return;
    }
    let event = job.event.as_ref();
    let meta = &job.meta;
    let event_id = job.event_id();
    let endpoint_id = job.endpoint_id(source).unwrap_or_default();
    let notice = Notice::parked(
        &Parked {
            event_id: &event_id,
            endpoint_id: &endpoint_id,
            tenant_id: event.and_then(|e| e.tenant_id.as_deref()),
            reason: failure.reason.code(),
            dlq_topic,
            partition,
            offset,
            attempts: meta.attempt,
            last_status: failure.last_status,
            last_error: &failure.message,
        },
        now_ms(),
    );
    operator.notify(notice);
}
