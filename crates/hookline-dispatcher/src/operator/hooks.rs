//! The notices, built where the dispatcher learns what they tell: a delivery parked, a
//! circuit opened or closed, an endpoint disabled or enabled again. Each builds one notice
//! and hands it over without waiting.

use std::sync::Mutex;

use hookline_core::breaker::{BreakerState, CircuitBreaker};
use hookline_core::endpoint::EndpointConfig;

use super::Operator;
use super::notice::{Notice, Parked};
use crate::delivery::{Job, now_ms};
use crate::envelope::Failure;
use crate::record::SourceRecord;

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

/// `endpoint`'s circuit changed to `state` (half-open is no news).
pub(crate) fn circuit(
    operator: &Operator,
    endpoint: &str,
    state: BreakerState,
    breaker: &Mutex<CircuitBreaker>,
) {
    if !operator.is_on() {
        return;
    }
    let now = now_ms();
    let notice = match state {
        BreakerState::Open => {
            let (failures, requests) = breaker
                .lock()
                .map_or((0, 0), |breaker| breaker.last_decision());
            operator.circuit_opened_at(endpoint, Some(now));
            Notice::circuit_opened(endpoint, failures, requests, now)
        }
        BreakerState::Closed => {
            let opened_at = operator.circuit_opened_at(endpoint, None);
            Notice::circuit_closed(endpoint, opened_at, now)
        }
        BreakerState::HalfOpen => return,
    };
    operator.notify(notice);
}

/// The dispatcher disabled `endpoint` for `reason` at `at_ms` (its write-back was taken).
pub(crate) fn disabled(operator: &Operator, endpoint: &str, reason: &str, at_ms: i64) {
    if operator.is_on() {
        operator.notify(Notice::disabled(endpoint, reason, at_ms));
    }
}

/// The endpoint table took `config` for `endpoint`, which was `was` before: a flip of
/// `enabled` is news on every replica, whoever wrote it (`hookline endpoints enable` or
/// `disable`, or a dispatcher's lifecycle). Every replica derives the same id from the
/// disable's time, so receivers see one notice, and the replica whose lifecycle disabled it
/// (which told it already, [`disabled`]) de-duplicates its own copy.
pub(crate) fn table_changed(
    operator: &Operator,
    endpoint: &str,
    was: Option<&EndpointConfig>,
    config: &EndpointConfig,
) {
    let Some(was) = was else { return };
    if !operator.is_on() || was.enabled == config.enabled {
        return;
    }
    let notice = if config.enabled {
        Notice::enabled(
            endpoint,
            was.disabled_reason.as_deref(),
            was.disabled_at_ms,
            now_ms(),
        )
    } else {
        Notice::disabled(
            endpoint,
            config.disabled_reason.as_deref().unwrap_or("disabled"),
            config.disabled_at_ms.unwrap_or_else(now_ms),
        )
    };
    operator.notify(notice);
}
