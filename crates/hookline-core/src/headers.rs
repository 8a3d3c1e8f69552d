//! Kafka headers that carry a delivery's retry state on retry and DLQ records.
//!
//! Values are ASCII decimal strings (epoch milliseconds for times). A record without any
//! of these headers is a fresh delivery from the source topic.

use std::num::ParseIntError;

/// Attempts made so far.
pub const ATTEMPT: &str = "hookline-attempt";
/// When the next attempt is due, epoch milliseconds.
pub const DUE_AT: &str = "hookline-due-at";
/// When the next attempt may start, epoch milliseconds, when that is later than
/// `hookline-due-at` (a wait longer than the largest tier, taken in hops).
pub const RETRY_AT: &str = "hookline-retry-at";
/// Topic of the original record.
pub const ORIGINAL_TOPIC: &str = "hookline-original-topic";
/// Partition of the original record.
pub const ORIGINAL_PARTITION: &str = "hookline-original-partition";
/// Offset of the original record.
pub const ORIGINAL_OFFSET: &str = "hookline-original-offset";
/// When the first attempt was made, epoch milliseconds.
pub const FIRST_ATTEMPT_AT: &str = "hookline-first-attempt-at";
/// Short description of the last error (no secrets).
pub const LAST_ERROR: &str = "hookline-last-error";
/// W3C trace context, passed on to the HTTP request.
pub const TRACEPARENT: &str = "traceparent";

/// When the event was first published, epoch milliseconds: the Kafka timestamp of its
/// record on the events topic (or, for a tenant event, the fan-out topic). A provenance
/// header, not retry state: the dispatcher adds it to a fresh record it consumes and it is
/// carried, unchanged, to tier records, the DLQ and redrives, for the attempt log.
pub const PUBLISHED_AT: &str = "hookline-published-at";
/// The DLQ record a redrive came from, `<dlq topic>/<partition>/<offset>` (written by
/// `hookline dlq redrive`, carried on the retries that follow).
pub const REDRIVEN_FROM: &str = "hookline-redriven-from";

/// Prefix of every hookline header.
pub const PREFIX: &str = "hookline-";

/// Longest `hookline-last-error` value written, in bytes.
pub const MAX_LAST_ERROR_LEN: usize = 512;

/// Whether a header is one of hookline's own (to be replaced, not copied, on re-publish).
pub fn is_hookline_header(name: &str) -> bool {
    name.starts_with(PREFIX)
}

/// The headers that carry a delivery's retry state ([`DeliveryMeta`]).
pub const DELIVERY_HEADERS: [&str; 8] = [
    ATTEMPT,
    DUE_AT,
    RETRY_AT,
    ORIGINAL_TOPIC,
    ORIGINAL_PARTITION,
    ORIGINAL_OFFSET,
    FIRST_ATTEMPT_AT,
    LAST_ERROR,
];

/// Whether a header carries retry state: the dispatcher rewrites these on each retry and
/// keeps every other header, hookline's provenance headers (`hookline-redriven-*`) included.
pub fn is_delivery_header(name: &str) -> bool {
    DELIVERY_HEADERS.contains(&name)
}

/// A delivery's retry state, as carried in headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryMeta {
    /// Attempts made so far.
    pub attempt: u32,
    /// When the next attempt is due, epoch milliseconds.
    pub due_at_ms: Option<i64>,
    /// When the next attempt may start, when later than `due_at_ms` (the tier hops again).
    pub retry_at_ms: Option<i64>,
    /// Topic of the original record.
    pub original_topic: String,
    /// Partition of the original record.
    pub original_partition: i32,
    /// Offset of the original record.
    pub original_offset: i64,
    /// When the first attempt was made, epoch milliseconds.
    pub first_attempt_at_ms: Option<i64>,
    /// Short description of the last error.
    pub last_error: Option<String>,
}

/// A hookline header that is missing or unreadable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// A required header is absent though other hookline headers are present.
    #[error("header `{name}` is missing")]
    Missing {
        /// The header.
        name: &'static str,
    },
    /// The header has no value.
    #[error("header `{name}` has no value")]
    NoValue {
        /// The header.
        name: &'static str,
    },
    /// The header is not UTF-8.
    #[error("header `{name}` is not UTF-8")]
    NotUtf8 {
        /// The header.
        name: &'static str,
        /// The decoding error.
        #[source]
        source: std::str::Utf8Error,
    },
    /// The header is not a decimal number in range.
    #[error("header `{name}` is `{value}`, not a decimal number in range")]
    InvalidNumber {
        /// The header.
        name: &'static str,
        /// The value found.
        value: String,
        /// The parsing error.
        #[source]
        source: ParseIntError,
    },
}

#[derive(Default)]
struct Seen<'a> {
    attempt: Option<Option<&'a [u8]>>,
    due_at: Option<Option<&'a [u8]>>,
    retry_at: Option<Option<&'a [u8]>>,
    topic: Option<Option<&'a [u8]>>,
    partition: Option<Option<&'a [u8]>>,
    offset: Option<Option<&'a [u8]>>,
    first_attempt_at: Option<Option<&'a [u8]>>,
    last_error: Option<Option<&'a [u8]>>,
}

impl DeliveryMeta {
    /// State for a record of `original_topic` before any attempt.
    pub fn new(original_topic: impl Into<String>, partition: i32, offset: i64) -> Self {
        DeliveryMeta {
            attempt: 0,
            due_at_ms: None,
            retry_at_ms: None,
            original_topic: original_topic.into(),
            original_partition: partition,
            original_offset: offset,
            first_attempt_at_ms: None,
            last_error: None,
        }
    }

    /// Reads the state from a record's headers (the last of repeated headers wins).
    /// `Ok(None)` when there are no hookline headers: a fresh record. When some are present,
    /// `hookline-attempt` and the three `hookline-original-*` headers are required.
    pub fn from_headers<'a>(
        headers: impl Iterator<Item = (&'a str, Option<&'a [u8]>)>,
    ) -> Result<Option<Self>, HeaderError> {
        let mut seen = Seen::default();
        let mut any = false;
        for (name, value) in headers {
            let slot = match name {
                ATTEMPT => &mut seen.attempt,
                DUE_AT => &mut seen.due_at,
                RETRY_AT => &mut seen.retry_at,
                ORIGINAL_TOPIC => &mut seen.topic,
                ORIGINAL_PARTITION => &mut seen.partition,
                ORIGINAL_OFFSET => &mut seen.offset,
                FIRST_ATTEMPT_AT => &mut seen.first_attempt_at,
                LAST_ERROR => &mut seen.last_error,
                _ => continue,
            };
            *slot = Some(value);
            any = true;
        }
        if !any {
            return Ok(None);
        }
        Ok(Some(DeliveryMeta {
            attempt: number(ATTEMPT, required(ATTEMPT, seen.attempt)?)?,
            due_at_ms: optional(DUE_AT, seen.due_at)?,
            retry_at_ms: optional(RETRY_AT, seen.retry_at)?,
            original_topic: text(ORIGINAL_TOPIC, required(ORIGINAL_TOPIC, seen.topic)?)?.to_owned(),
            original_partition: number(
                ORIGINAL_PARTITION,
                required(ORIGINAL_PARTITION, seen.partition)?,
            )?,
            original_offset: number(ORIGINAL_OFFSET, required(ORIGINAL_OFFSET, seen.offset)?)?,
            first_attempt_at_ms: optional(FIRST_ATTEMPT_AT, seen.first_attempt_at)?,
            last_error: seen
                .last_error
                .flatten()
                .map(|v| String::from_utf8_lossy(v).into_owned()),
        }))
    }

    /// The headers to write, in a fixed order; absent optional fields are left out and
    /// `last_error` is cut to [`MAX_LAST_ERROR_LEN`] bytes.
    pub fn to_headers(&self) -> Vec<(&'static str, Vec<u8>)> {
        let mut out = vec![(ATTEMPT, self.attempt.to_string().into_bytes())];
        if let Some(due) = self.due_at_ms {
            out.push((DUE_AT, due.to_string().into_bytes()));
        }
        if let Some(retry_at) = self.retry_at_ms {
            out.push((RETRY_AT, retry_at.to_string().into_bytes()));
        }
        out.push((ORIGINAL_TOPIC, self.original_topic.clone().into_bytes()));
        out.push((
            ORIGINAL_PARTITION,
            self.original_partition.to_string().into_bytes(),
        ));
        out.push((
            ORIGINAL_OFFSET,
            self.original_offset.to_string().into_bytes(),
        ));
        if let Some(first) = self.first_attempt_at_ms {
            out.push((FIRST_ATTEMPT_AT, first.to_string().into_bytes()));
        }
        if let Some(err) = &self.last_error {
            let mut end = err.len().min(MAX_LAST_ERROR_LEN);
            while !err.is_char_boundary(end) {
                end -= 1;
            }
            out.push((LAST_ERROR, err.as_bytes()[..end].to_vec()));
        }
        out
    }
}

fn required<'a>(
    name: &'static str,
    seen: Option<Option<&'a [u8]>>,
) -> Result<&'a [u8], HeaderError> {
    seen.ok_or(HeaderError::Missing { name })?
        .ok_or(HeaderError::NoValue { name })
}

fn optional(name: &'static str, seen: Option<Option<&[u8]>>) -> Result<Option<i64>, HeaderError> {
    seen.map(|v| number(name, v.ok_or(HeaderError::NoValue { name })?))
        .transpose()
}

fn text<'a>(name: &'static str, value: &'a [u8]) -> Result<&'a str, HeaderError> {
    std::str::from_utf8(value).map_err(|source| HeaderError::NotUtf8 { name, source })
}

fn number<T: std::str::FromStr<Err = ParseIntError>>(
    name: &'static str,
    value: &[u8],
) -> Result<T, HeaderError> {
    let s = text(name, value)?;
    s.parse().map_err(|source| HeaderError::InvalidNumber {
        name,
        value: s.chars().take(64).collect(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> DeliveryMeta {
        DeliveryMeta {
            attempt: 3,
            due_at_ms: Some(1_700_000_005_000),
            retry_at_ms: Some(1_700_000_009_000),
            original_topic: "webhook-events".into(),
            original_partition: 4,
            original_offset: 99,
            first_attempt_at_ms: Some(1_700_000_000_000),
            last_error: Some("HTTP 503".into()),
        }
    }

    fn parse(headers: &[(&str, Option<&[u8]>)]) -> Result<Option<DeliveryMeta>, HeaderError> {
        DeliveryMeta::from_headers(headers.iter().copied())
    }

    #[test]
    fn round_trip_with_foreign_headers_around() {
        let written = meta().to_headers();
        let mut headers: Vec<(&str, Option<&[u8]>)> =
            vec![("traceparent", Some(b"00-x".as_slice()))];
        headers.extend(written.iter().map(|(k, v)| (*k, Some(v.as_slice()))));
        headers.push(("hookline-future", Some(b"?".as_slice())));
        assert_eq!(parse(&headers).expect("parse"), Some(meta()));
        assert_eq!(written[0], (ATTEMPT, b"3".to_vec()));
    }

    #[test]
    fn minimal_round_trip_and_fresh_records() {
        let m = DeliveryMeta::new("t", 0, 0);
        let written = m.to_headers();
        assert_eq!(written.len(), 4);
        let headers: Vec<_> = written
            .iter()
            .map(|(k, v)| (*k, Some(v.as_slice())))
            .collect();
        assert_eq!(parse(&headers).expect("parse"), Some(m));
        assert_eq!(parse(&[]).expect("parse"), None);
        assert_eq!(
            parse(&[("traceparent", Some(b"x".as_slice()))]).expect("parse"),
            None
        );
    }

    #[test]
    fn last_value_wins() {
        let mut headers: Vec<(&str, Option<&[u8]>)> = Vec::new();
        let written = meta().to_headers();
        headers.extend(written.iter().map(|(k, v)| (*k, Some(v.as_slice()))));
        headers.push((ATTEMPT, Some(b"4".as_slice())));
        assert_eq!(parse(&headers).expect("parse").map(|m| m.attempt), Some(4));
    }

    #[test]
    fn errors_name_the_header() {
        assert_eq!(
            parse(&[(ATTEMPT, Some(b"1".as_slice()))]),
            Err(HeaderError::Missing {
                name: ORIGINAL_TOPIC
            })
        );
        assert_eq!(
            parse(&[(DUE_AT, Some(b"1".as_slice()))]),
            Err(HeaderError::Missing { name: ATTEMPT })
        );
        assert_eq!(
            parse(&[(ATTEMPT, None)]),
            Err(HeaderError::NoValue { name: ATTEMPT })
        );
        let bad = [
            (ATTEMPT, Some(b"-1".as_slice())),
            (ORIGINAL_TOPIC, Some(b"t".as_slice())),
            (ORIGINAL_PARTITION, Some(b"0".as_slice())),
            (ORIGINAL_OFFSET, Some(b"0".as_slice())),
        ];
        assert!(matches!(
            parse(&bad),
            Err(HeaderError::InvalidNumber { name: ATTEMPT, .. })
        ));
        let not_utf8 = [(ATTEMPT, Some([0xff_u8].as_slice()))];
        assert!(matches!(
            parse(&not_utf8),
            Err(HeaderError::NotUtf8 { name: ATTEMPT, .. })
        ));
    }

    #[test]
    fn long_last_error_is_cut_at_a_char_boundary() {
        let m = DeliveryMeta {
            last_error: Some("é".repeat(MAX_LAST_ERROR_LEN)),
            ..meta()
        };
        let headers = m.to_headers();
        let (_, v) = headers
            .iter()
            .find(|(k, _)| *k == LAST_ERROR)
            .expect("present");
        assert_eq!(v.len(), MAX_LAST_ERROR_LEN);
        assert!(std::str::from_utf8(v).is_ok());
        assert!(is_hookline_header(LAST_ERROR));
        assert!(!is_hookline_header(TRACEPARENT));
    }
}

/// Outside input never panics the header reader: any list of names and values, hookline's
/// names with values of any bytes (huge, negative, not UTF-8), and valid state with values
/// edited. State read back is written again and reads back the same.
#[cfg(test)]
mod fuzz {
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::*;
    use crate::fuzz::{bytes, config, edge_number};

    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => proptest::sample::select(&DELIVERY_HEADERS[..]).prop_map(str::to_owned),
            1 => Just(TRACEPARENT.to_owned()),
            1 => Just("hookline-redriven-from".to_owned()),
            1 => any::<String>(),
        ]
    }

    fn value() -> impl Strategy<Value = Option<Vec<u8>>> {
        let bytes = prop_oneof![
            3 => edge_number().prop_map(String::into_bytes),
            1 => Just(b" 1".to_vec()),
            1 => Just(b"+1".to_vec()),
            1 => Just(vec![b'1', 0xff]),
            1 => Just(vec![0xc3]),
            1 => Just(Vec::new()),
            2 => bytes(),
        ];
        proptest::option::weighted(0.9, bytes)
    }

    fn check(headers: &[(String, Option<Vec<u8>>)]) -> Result<(), TestCaseError> {
        let read = |headers: &[(String, Option<Vec<u8>>)]| {
            DeliveryMeta::from_headers(headers.iter().map(|(n, v)| (n.as_str(), v.as_deref())))
        };
        if let Ok(Some(meta)) = read(headers) {
            let written: Vec<(String, Option<Vec<u8>>)> = meta
                .to_headers()
                .into_iter()
                .map(|(n, v)| (n.to_owned(), Some(v)))
                .collect();
            let mut expected = meta.clone();
            if let Some(error) = &mut expected.last_error {
                let mut end = error.len().min(MAX_LAST_ERROR_LEN);
                while !error.is_char_boundary(end) {
                    end -= 1;
                }
                error.truncate(end);
            }
            prop_assert_eq!(read(&written), Ok(Some(expected)));
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(config(512))]

        #[test]
        fn any_names_and_values(headers in vec((name(), value()), 0..12)) {
            check(&headers)?;
        }

        #[test]
        fn valid_state_with_edited_values(
            edits in vec((proptest::sample::select(&DELIVERY_HEADERS[..]), value()), 1..4),
        ) {
            let mut headers: Vec<(String, Option<Vec<u8>>)> = DeliveryMeta {
                due_at_ms: Some(5),
                retry_at_ms: Some(6),
                first_attempt_at_ms: Some(1),
                last_error: Some("HTTP 503".into()),
                ..DeliveryMeta::new("webhook-events", 1, 2)
            }
            .to_headers()
            .into_iter()
            .map(|(n, v)| (n.to_owned(), Some(v)))
            .collect();
            for (name, value) in edits {
                match headers.iter_mut().find(|(n, _)| n == name) {
                    Some(header) => header.1 = value,
                    None => headers.push((name.to_owned(), value)),
                }
            }
            check(&headers)?;
        }
    }
}
