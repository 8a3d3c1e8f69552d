//! W3C trace context (`traceparent`): the trace id of a value (for the DLQ envelope's
//! `trace_id`), and the value a delivery passes on to the endpoint, a child of the event's.

use rand::Rng;

/// The trace id (32 lowercase hex digits) of a W3C trace context `traceparent` value,
/// `<version>-<trace-id>-<parent-id>-<flags>`; `None` when the value is not a valid one,
/// including the all-zero ids the specification declares invalid.
pub fn trace_id_of(traceparent: &str) -> Option<&str> {
    let mut parts = traceparent.trim().split('-');
    let version = parts.next()?;
    let trace_id = parts.next()?;
    let parent_id = parts.next()?;
    let flags = parts.next()?;
    // Version 00 has exactly four parts; later versions may append more.
    let more = parts.next().is_some();
    let valid = is_lower_hex(version, 2)
        && version != "ff"
        && !(version == "00" && more)
        && is_lower_hex(trace_id, 32)
        && trace_id.bytes().any(|b| b != b'0')
        && is_lower_hex(parent_id, 16)
        && parent_id.bytes().any(|b| b != b'0')
        && is_lower_hex(flags, 2);
    valid.then_some(trace_id)
}

/// The `traceparent` for an HTTP attempt: the same trace and flags as `parent` with a new
/// parent id (the attempt's span), or a new sampled trace when `parent` is absent or invalid.
pub fn child_traceparent(parent: Option<&str>, rng: &mut impl Rng) -> String {
    let span: u64 = rng.random_range(1..=u64::MAX);
    match parent.and_then(|value| trace_id_of(value).map(|trace| (value, trace))) {
        Some((value, trace)) => {
            let flags = value.trim().split('-').nth(3).unwrap_or("01");
            format!("00-{trace}-{span:016x}-{flags}")
        }
        None => {
            let trace: u128 = rng.random_range(1..=u128::MAX);
            format!("00-{trace:032x}-{span:016x}-01")
        }
    }
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_continues_the_events_trace_with_its_own_span() {
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let child = child_traceparent(Some(parent), &mut rand::rng());
        assert_eq!(
            trace_id_of(&child),
            Some("0af7651916cd43dd8448eb211c80319c")
        );
        assert_ne!(child, parent, "a new span id");
        assert!(child.ends_with("-01"));
    }

    #[test]
    fn without_a_valid_parent_an_attempt_starts_a_trace() {
        for parent in [None, Some("garbage")] {
            let child = child_traceparent(parent, &mut rand::rng());
            assert!(trace_id_of(&child).is_some(), "{child}");
        }
    }

    #[test]
    fn valid_traceparents_give_their_trace_id() {
        assert_eq!(
            trace_id_of("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            Some("0af7651916cd43dd8448eb211c80319c")
        );
        assert_eq!(
            trace_id_of("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-future"),
            Some("0af7651916cd43dd8448eb211c80319c")
        );
    }

    #[test]
    fn invalid_traceparents_give_none() {
        for bad in [
            "",
            "00-abc",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
        ] {
            assert_eq!(trace_id_of(bad), None, "{bad:?}");
        }
    }
}
