//! W3C trace context (`traceparent`): the trace id of a value (for the DLQ envelope's
//! `trace_id`), and the value a delivery passes on to the endpoint, a child of the event's.

use rand::Rng;

/// The trace id (32 lowercase hex digits) of a W3C trace context `traceparent` value,
/// `<version>-<trace-id>-<parent-id>-<flags>`; `None` when the value is not a valid one,
/// including the all-zero ids the specification declares invalid.
pub fn trace_id_of(traceparent: &str) -> Option<&str> {
    // Read at fixed places, once per attempt: splitting on '-' was most of its cost.
    // `00-<32>-<16>-<2>`: dashes at 2, 35 and 52; a later version may go on after a dash at 55.
    const LEN: usize = 55;
    let value = traceparent.trim();
    let bytes = value.as_bytes();
    if bytes.len() < LEN {
        return None;
    }
    let (head, rest) = bytes.split_at(LEN);
    let shape = head.iter().enumerate().all(|(i, &b)| match i {
        2 | 35 | 52 => b == b'-',
        _ => matches!(b, b'0'..=b'9' | b'a'..=b'f'),
    });
    // All ASCII up to 55, so every slice below is on a character boundary.
    if !shape {
        return None;
    }
    let (version, trace_id, parent_id) = (&value[..2], &value[3..35], &value[36..52]);
    let more = match rest.first() {
        None => false,
        Some(b'-') => true,
        // The flags run on past two digits.
        Some(_) => return None,
    };
    let valid = version != "ff"
        && !(version == "00" && more)
        && trace_id.bytes().any(|b| b != b'0')
        && parent_id.bytes().any(|b| b != b'0');
    valid.then_some(trace_id)
}

/// The `traceparent` for an HTTP attempt: the same trace and flags as `parent` with a new
/// parent id (the attempt's span), or a new sampled trace when `parent` is absent or invalid.
pub fn child_traceparent(parent: Option<&str>, rng: &mut impl Rng) -> String {
    let span: u64 = rng.random_range(1..=u64::MAX);
    // Written digit by digit, once per attempt: `format!`'s hex was most of its cost.
    let mut out = String::with_capacity(55);
    out.push_str("00-");
    match parent.and_then(|value| trace_id_of(value).map(|trace| (value, trace))) {
        Some((value, trace)) => {
            let flags = value.trim().split('-').nth(3).unwrap_or("01");
            out.push_str(trace);
            out.push('-');
            push_hex(&mut out, u128::from(span), 16);
            out.push('-');
            out.push_str(flags);
        }
        None => {
            let trace: u128 = rng.random_range(1..=u128::MAX);
            push_hex(&mut out, trace, 32);
            out.push('-');
            push_hex(&mut out, u128::from(span), 16);
            out.push_str("-01");
        }
    }
    out
}

/// Appends the last `digits` hex digits of `value`, lowercase, zero-padded.
fn push_hex(out: &mut String, value: u128, digits: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for digit in (0..digits).rev() {
        let nibble = (value >> (digit * 4)) & 0xf;
        out.push(char::from(HEX[nibble as usize]));
    }
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
    fn hex_digits_are_written_as_format_writes_them() {
        for (value, digits) in [
            (0_u128, 16),
            (1, 16),
            (u128::from(u64::MAX), 16),
            (0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c, 32),
            (u128::MAX, 32),
            (0xb7ad_6b71_6920_3331, 16),
        ] {
            let mut out = String::new();
            push_hex(&mut out, value, digits);
            let width = digits as usize;
            assert_eq!(out, format!("{value:0width$x}"), "{value:#x}");
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

    /// The reading by parts that the fixed places replaced, as the specification words it.
    fn by_parts(traceparent: &str) -> Option<&str> {
        let hex = |s: &str, len: usize| {
            s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        let mut parts = traceparent.trim().split('-');
        let (version, trace_id, parent_id, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let more = parts.next().is_some();
        let valid = hex(version, 2)
            && version != "ff"
            && !(version == "00" && more)
            && hex(trace_id, 32)
            && trace_id.bytes().any(|b| b != b'0')
            && hex(parent_id, 16)
            && parent_id.bytes().any(|b| b != b'0')
            && hex(flags, 2);
        valid.then_some(trace_id)
    }

    #[test]
    fn every_one_character_change_is_read_as_the_specification_reads_it() {
        let valid = [
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-future",
            " 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\t",
        ];
        let mut checked = 0;
        for value in valid {
            assert_eq!(trace_id_of(value), by_parts(value), "{value:?}");
            for (at, _) in value.char_indices() {
                for with in ["-", "0", "f", "A", "g", " ", "é", "", "--", "0-"] {
                    let changed = format!("{}{with}{}", &value[..at], &value[at + 1..]);
                    assert_eq!(trace_id_of(&changed), by_parts(&changed), "{changed:?}");
                    checked += 1;
                }
            }
            for cut in 0..value.len() {
                assert_eq!(trace_id_of(&value[..cut]), by_parts(&value[..cut]));
            }
        }
        assert!(checked > 1_500);
    }
}
