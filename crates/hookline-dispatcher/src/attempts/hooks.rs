//! The attempt log's records, built where delivery and fan-out learn an outcome. Each
//! builds one record and hands it over without waiting. The record of a delivery's outcome,
//! which reads the delivery's job, is built by the delivery stage (`delivery::hooks`) from
//! the helpers here.

use hookline_core::attempt_log::{AttemptKind, AttemptRecord};
use hookline_core::headers::TRACEPARENT;
use hookline_core::trace::trace_id_of;
use hookline_core::{Classification, WebhookEvent};

use super::AttemptLog;
use crate::clock::now_ms;
use crate::http::Attempt;
use crate::record::SourceRecord;

/// A record of `kind` about `event_id`, stamped now, with nothing else filled in.
pub(crate) fn base(
    log: &AttemptLog,
    event_id: String,
    kind: AttemptKind,
    attempt: u32,
) -> AttemptRecord {
    AttemptRecord {
        event_id,
        tenant_id: None,
        endpoint_id: None,
        kind,
        attempt,
        timestamp_ms: now_ms(),
        duration_ms: None,
        http_status: None,
        error_kind: None,
        response_excerpt: None,
        tier: None,
        reason: None,
        deliveries: None,
        dispatcher_id: log.dispatcher_id(),
        trace_id: None,
        published_at_ms: None,
        redriven_from: None,
    }
}

/// The provenance a record of `source` carries: when the event was first published, and
/// the DLQ record it was redriven from.
pub(crate) fn provenance(record: &mut AttemptRecord, source: &SourceRecord) {
    record.published_at_ms = source.published_at_ms();
    record.redriven_from = source.redriven_from();
}

/// Logs HTTP attempt `attempt_no` of `event` to endpoint `endpoint_id`.
pub(crate) fn attempt(
    log: &AttemptLog,
    source: &SourceRecord,
    event: &WebhookEvent,
    endpoint_id: &str,
    attempt_no: u32,
    attempt: &Attempt,
    classification: &Classification,
) {
    if !log.enabled() {
        return;
    }
    let mut record = base(
        log,
        event.event_id.clone(),
        AttemptKind::Attempt,
        attempt_no,
    );
    record.tenant_id.clone_from(&event.tenant_id);
    record.endpoint_id = Some(endpoint_id.to_owned());
    record.duration_ms = Some(i64::try_from(attempt.took.as_millis()).unwrap_or(i64::MAX));
    record.http_status = attempt.status();
    record.error_kind = match classification {
        Classification::Success => None,
        other => Some(other.code().to_owned()),
    };
    record.response_excerpt = log.excerpt(&attempt.body);
    record.trace_id = attempt
        .traceparent
        .as_deref()
        .and_then(trace_id_of)
        .map(str::to_owned);
    provenance(&mut record, source);
    log.push(record);
}

/// Logs that tenant event `event` became `deliveries` deliveries.
pub(crate) fn fanned_out(
    log: &AttemptLog,
    event: &WebhookEvent,
    source: &SourceRecord,
    deliveries: usize,
) {
    if !log.enabled() {
        return;
    }
    let mut record = base(log, event.event_id.clone(), AttemptKind::FannedOut, 0);
    record.tenant_id.clone_from(&event.tenant_id);
    record.deliveries = Some(u32::try_from(deliveries).unwrap_or(u32::MAX));
    record.trace_id = trace_of(source);
    provenance(&mut record, source);
    log.push(record);
}

/// The trace id of the W3C `traceparent` header `source` carries, if any.
pub(crate) fn trace_of(source: &SourceRecord) -> Option<String> {
    source
        .header(TRACEPARENT)
        .and_then(|value| std::str::from_utf8(value).ok())
        .and_then(trace_id_of)
        .map(str::to_owned)
}
