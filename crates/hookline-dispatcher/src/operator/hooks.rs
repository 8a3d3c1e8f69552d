//! The notices, built where the dispatcher learns what they tell: a circuit opened or
//! closed, an endpoint disabled or enabled again. Each builds one notice and hands it over
//! without waiting. A delivery parked is told by the delivery stage (`delivery::hooks`),
//! which reads the delivery's job.

use std::sync::Mutex;

use hookline_core::breaker::{BreakerState, CircuitBreaker};
use hookline_core::endpoint::EndpointConfig;

use super::Operator;
use super::notice::Notice;
use crate::clock::now_ms;

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
