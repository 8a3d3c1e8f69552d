//! Fitting an envelope into the DLQ topic's maximum record size: the exact length of its
//! Avro datum, computed without encoding it, and [`DlqEnvelope::fit_within`], which cuts the
//! payload (then header values, then the error message) until the framed value fits. Pure.

use super::{DlqEnvelope, prefix_within, truncate_message};
use crate::framing::FRAMING_LEN;

/// What [`DlqEnvelope::fit_within`] did to an envelope.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// It already fitted; nothing changed.
    Unchanged,
    /// It was cut to fit, and is marked so: `original_payload_truncated` is set and
    /// `original_payload_size` holds `original_size`.
    Truncated {
        /// Full size of the original payload, in bytes.
        original_size: u64,
    },
    /// It does not fit even with its payload, header values and error message cut to
    /// nothing: its other fields alone are too large for the limit. It is left cut and
    /// marked, and must not be written under that limit.
    TooLarge {
        /// The smallest framed length reached, in bytes.
        framed_len: usize,
    },
}

impl DlqEnvelope {
    /// The length in bytes of [`to_avro_datum`](Self::to_avro_datum)'s output (the bare
    /// datum, without registry framing), computed from the fields without encoding them.
    pub fn avro_datum_len(&self) -> usize {
        let headers = if self.original_headers.is_empty() {
            1
        } else {
            let items = self.original_headers.iter().fold(0, |sum: usize, h| {
                sum.saturating_add(bytes_len(h.key.len()))
                    .saturating_add(opt_len(h.value.as_ref().map(|v| bytes_len(v.len()))))
            });
            // One block (its item count), the items, then the empty block that ends an array.
            len_len(self.original_headers.len())
                .saturating_add(items)
                .saturating_add(1)
        };
        let text = |s: &Option<String>| opt_len(s.as_ref().map(|s| bytes_len(s.len())));
        let attempts = i32::try_from(self.attempts).unwrap_or(i32::MAX);
        let size = self
            .original_payload_size
            .map(|s| long_len(i64::try_from(s).unwrap_or(i64::MAX)));
        [
            int_len(self.envelope_version),
            bytes_len(self.event_id.len()),
            text(&self.event_type),
            text(&self.endpoint_id),
            text(&self.endpoint_url),
            bytes_len(self.original_topic.len()),
            int_len(self.original_partition),
            long_len(self.original_offset),
            opt_len(self.original_key.as_ref().map(|k| bytes_len(k.len()))),
            bytes_len(self.original_payload_bytes.len()),
            headers,
            long_len(i64::from(self.error_reason.index())),
            bytes_len(truncate_message(&self.error_message).len()),
            opt_len(self.last_status_code.map(|s| int_len(i32::from(s)))),
            int_len(attempts),
            opt_len(self.first_attempt_at_ms.map(long_len)),
            long_len(self.error_timestamp_ms),
            bytes_len(self.dispatcher_id.len()),
            opt_len(self.trace_id().map(|id| bytes_len(id.len()))),
            1,
            opt_len(size),
            text(&self.tenant_id),
        ]
        .into_iter()
        .fold(0, usize::saturating_add)
    }

    /// Cuts the envelope so that its Confluent-framed Avro value
    /// ([`to_framed_avro`](Self::to_framed_avro): the datum plus
    /// [`FRAMING_LEN`] bytes) is at most `max_encoded_bytes` long.
    ///
    /// An envelope that fits is left alone. Otherwise the payload is cut to its first bytes,
    /// and when even an empty payload is too much, header values (largest first, names kept)
    /// and then the error message (at a char boundary); the envelope is marked
    /// `original_payload_truncated`, with the payload's full size in `original_payload_size`
    /// (kept from an earlier cut). Pass the room the producer leaves for the value: its
    /// `message.max.bytes` less the record's key, headers and per-record overhead.
    pub fn fit_within(&mut self, max_encoded_bytes: usize) -> Fit {
        let budget = max_encoded_bytes.saturating_sub(FRAMING_LEN);
        let over = |e: &DlqEnvelope| e.avro_datum_len().saturating_sub(budget);
        // A framed value shorter than its framing never fits; the datum is never empty.
        if over(self) == 0 && max_encoded_bytes >= FRAMING_LEN {
            return Fit::Unchanged;
        }
        let original_size = match (self.original_payload_truncated, self.original_payload_size) {
            (true, Some(size)) => size,
            _ => u64::try_from(self.original_payload_bytes.len()).unwrap_or(u64::MAX),
        };
        self.original_payload_truncated = true;
        self.original_payload_size = Some(original_size);

        // Cutting n bytes of a value makes the datum at least n bytes shorter (its length
        // prefix can only shrink), so each cut below removes just what is over, or all.
        let excess = over(self);
        cut(&mut self.original_payload_bytes, excess);
        loop {
            let excess = over(self);
            let largest = self
                .original_headers
                .iter_mut()
                .filter_map(|h| h.value.as_mut())
                .filter(|v| !v.is_empty())
                .max_by_key(|v| v.len());
            match (excess, largest) {
                (0, _) | (_, None) => break,
                (excess, Some(value)) => cut(value, excess),
            }
        }
        let excess = over(self);
        if excess > 0 {
            let message = truncate_message(&self.error_message);
            let keep = message.len().saturating_sub(excess);
            self.error_message = prefix_within(message, keep).to_owned();
        }

        if over(self) == 0 {
            Fit::Truncated { original_size }
        } else {
            Fit::TooLarge {
                framed_len: self.avro_datum_len().saturating_add(FRAMING_LEN),
            }
        }
    }
}

/// Drops the last `excess` bytes of `bytes` (all of them when it is shorter).
fn cut(bytes: &mut Vec<u8>, excess: usize) {
    bytes.truncate(bytes.len().saturating_sub(excess));
}

/// Bytes of an Avro `long` or `int`: a zig-zag varint, 7 bits a byte.
fn long_len(n: i64) -> usize {
    let mut zigzag = ((n << 1) ^ (n >> 63)).cast_unsigned();
    let mut len = 1;
    while zigzag >= 0x80 {
        zigzag >>= 7;
        len += 1;
    }
    len
}

fn int_len(n: i32) -> usize {
    long_len(i64::from(n))
}

/// Bytes of the length prefix of a `bytes` or `string` value, or of an array block's count.
fn len_len(len: usize) -> usize {
    long_len(i64::try_from(len).unwrap_or(i64::MAX))
}

/// Bytes of a `bytes` or `string` value `len` bytes long.
fn bytes_len(len: usize) -> usize {
    len_len(len).saturating_add(len)
}

/// Bytes of a `["null", T]` union: the branch index (one byte), then the value if any.
fn opt_len(value_len: Option<usize>) -> usize {
    value_len.map_or(1, |len| len.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::{any, prop_assert, prop_assert_eq, proptest};

    use super::*;
    use crate::envelope::fixtures::{TRACE_ID, TRACEPARENT, full, minimal};
    use crate::envelope::{DlqHeader, ErrorReason, MAX_ERROR_MESSAGE_LEN};
    use crate::schema::dlq_envelope_schema;

    /// The producer's default `message.max.bytes`.
    const KAFKA_DEFAULT_MAX: usize = 1_000_000;

    fn framed_len(e: &DlqEnvelope) -> usize {
        e.to_framed_avro(7).expect("encodes").len()
    }

    fn decoded(framed: &[u8]) -> DlqEnvelope {
        DlqEnvelope::from_avro_datum(&framed[FRAMING_LEN..], dlq_envelope_schema())
            .expect("decodes")
    }

    #[test]
    fn the_computed_length_is_that_of_the_encoding() {
        let mut big = full();
        big.original_payload_bytes = vec![7; 1_500_000];
        big.error_message = "é".repeat(MAX_ERROR_MESSAGE_LEN);
        big.attempts = u32::MAX;
        big.original_offset = i64::MIN;
        big.original_partition = -1;
        big.original_payload_truncated = true;
        big.original_payload_size = Some(u64::MAX);
        for e in [full(), minimal(), big] {
            let datum = e.to_avro_datum().expect("encodes");
            assert_eq!(e.avro_datum_len(), datum.len());
        }
    }

    #[test]
    fn a_small_envelope_is_unchanged() {
        let mut e = full();
        let framed = framed_len(&e);
        assert_eq!(e.fit_within(KAFKA_DEFAULT_MAX), Fit::Unchanged);
        assert_eq!(e.fit_within(framed), Fit::Unchanged, "exactly at the limit");
        assert_eq!(e, full());
        assert!(!e.original_payload_truncated);
        assert_eq!(e.original_payload_size, None);
    }

    #[test]
    fn a_payload_of_1_5_mb_is_cut_to_fit_under_1_000_000_and_its_size_kept() {
        let original: Vec<u8> = (0..1_500_000u32).map(|i| (i % 251) as u8).collect();
        let mut e = DlqEnvelope {
            original_payload_bytes: original.clone(),
            ..full()
        };
        assert!(framed_len(&e) > KAFKA_DEFAULT_MAX);
        assert_eq!(
            e.fit_within(KAFKA_DEFAULT_MAX),
            Fit::Truncated {
                original_size: 1_500_000
            }
        );
        let framed = e.to_framed_avro(7).expect("encodes");
        assert!(framed.len() <= KAFKA_DEFAULT_MAX, "{}", framed.len());
        assert!(
            framed.len() >= KAFKA_DEFAULT_MAX - 4,
            "cut no more than needed"
        );
        let back = decoded(&framed);
        assert!(back.original_payload_truncated);
        assert_eq!(back.original_payload_size, Some(1_500_000));
        assert!(
            original.starts_with(&back.original_payload_bytes),
            "a prefix"
        );
        assert_eq!(
            (&back.original_headers, &back.error_message),
            (&full().original_headers, &full().error_message),
            "the rest is untouched"
        );
        assert_eq!(back.trace_id(), Some(TRACE_ID));

        // Fitting again, or under a tighter limit, keeps the full size.
        assert_eq!(e.fit_within(KAFKA_DEFAULT_MAX), Fit::Unchanged);
        assert_eq!(
            e.fit_within(500_000),
            Fit::Truncated {
                original_size: 1_500_000
            }
        );
        assert_eq!(e.original_payload_size, Some(1_500_000));
        assert!(framed_len(&e) <= 500_000);
    }

    #[test]
    fn large_header_values_are_cut_after_the_payload_largest_first() {
        let mut e = DlqEnvelope {
            original_payload_bytes: vec![1; 10_000],
            original_headers: vec![
                DlqHeader {
                    key: "traceparent".into(),
                    value: Some(TRACEPARENT.as_bytes().to_vec()),
                },
                DlqHeader {
                    key: "big".into(),
                    value: Some(vec![2; 600_000]),
                },
                DlqHeader {
                    key: "bigger".into(),
                    value: Some(vec![3; 700_000]),
                },
            ],
            ..minimal()
        };
        assert_eq!(
            e.fit_within(KAFKA_DEFAULT_MAX),
            Fit::Truncated {
                original_size: 10_000
            }
        );
        assert!(framed_len(&e) <= KAFKA_DEFAULT_MAX);
        assert!(e.original_payload_bytes.is_empty());
        let lens: Vec<_> = e
            .original_headers
            .iter()
            .map(|h| (h.key.as_str(), h.value.as_ref().map(Vec::len)))
            .collect();
        assert_eq!(lens[0], ("traceparent", Some(TRACEPARENT.len())));
        assert_eq!(lens[1], ("big", Some(600_000)));
        let (_, Some(bigger)) = lens[2] else {
            panic!("the header is kept, its value cut");
        };
        assert!(bigger < 700_000 && bigger > 300_000, "{bigger}");
        assert_eq!(e.trace_id(), Some(TRACE_ID));
    }

    #[test]
    fn the_error_message_is_cut_last_at_a_char_boundary() {
        let mut e = DlqEnvelope {
            original_payload_bytes: vec![1; 100],
            error_message: "é".repeat(MAX_ERROR_MESSAGE_LEN),
            ..minimal()
        };
        let without_message = DlqEnvelope {
            original_payload_bytes: Vec::new(),
            error_message: String::new(),
            original_payload_truncated: true,
            original_payload_size: Some(100),
            ..e.clone()
        };
        let limit = framed_len(&without_message) + 1_001;
        assert_eq!(e.fit_within(limit), Fit::Truncated { original_size: 100 });
        assert!(framed_len(&e) <= limit);
        assert!(e.original_payload_bytes.is_empty());
        assert!(e.error_message.len() <= 1_000 && e.error_message.len() >= 990);
        assert!(e.error_message.chars().all(|c| c == 'é'));
    }

    #[test]
    fn an_envelope_whose_fixed_fields_are_too_large_is_too_large() {
        let mut e = DlqEnvelope {
            event_id: "e".repeat(2_000),
            ..full()
        };
        let Fit::TooLarge {
            framed_len: reached,
        } = e.fit_within(1_000)
        else {
            panic!("it cannot fit");
        };
        assert_eq!(reached, framed_len(&e));
        assert!(reached > 2_000);
        assert!(e.original_payload_truncated);
        assert!(e.original_payload_bytes.is_empty() && e.error_message.is_empty());
        for limit in [0, 1, FRAMING_LEN] {
            assert!(matches!(minimal().fit_within(limit), Fit::TooLarge { .. }));
        }
        assert_eq!(full().fit_within(usize::MAX), Fit::Unchanged);
    }

    #[test]
    fn framed_values_carry_the_schema_id_and_decode_back() {
        for e in [full(), minimal()] {
            let framed = e.to_framed_avro(0x0102_0304).expect("encodes");
            assert_eq!(framed[..FRAMING_LEN], [0, 1, 2, 3, 4]);
            assert_eq!(
                framed.len(),
                FRAMING_LEN + e.to_avro_datum().expect("encodes").len()
            );
            assert_eq!(decoded(&framed), e);
        }
    }

    proptest! {
        /// Whatever the envelope and the limit: no panic, an exact length, and a result that
        /// fits unless it says it cannot.
        #[test]
        fn fitting_never_exceeds_the_limit(
            payload_len in 0usize..20_000,
            header_lens in proptest::collection::vec(proptest::option::of(0usize..5_000), 0..4),
            message in ".{0,300}",
            event_id in "[a-z0-9_]{1,200}",
            attempts in any::<u32>(),
            offset in any::<i64>(),
            status in proptest::option::of(any::<u16>()),
            limit in 0usize..30_000,
        ) {
            let mut e = DlqEnvelope {
                event_id,
                original_offset: offset,
                original_payload_bytes: vec![9; payload_len],
                original_headers: header_lens
                    .iter()
                    .enumerate()
                    .map(|(i, len)| DlqHeader {
                        key: format!("h{i}"),
                        value: len.map(|n| vec![8; n]),
                    })
                    .collect(),
                error_message: message,
                attempts,
                last_status_code: status,
                error_reason: ErrorReason::PayloadTooLarge,
                ..full()
            };
            let before = e.clone();
            prop_assert_eq!(e.avro_datum_len(), e.to_avro_datum().expect("encodes").len());
            let fit = e.fit_within(limit);
            let len = framed_len(&e);
            match fit {
                Fit::Unchanged => {
                    prop_assert!(len <= limit);
                    prop_assert_eq!(&e, &before);
                }
                Fit::Truncated { original_size } => {
                    prop_assert!(len <= limit);
                    prop_assert_eq!(original_size, payload_len as u64);
                    prop_assert_eq!(e.original_payload_size, Some(original_size));
                    prop_assert!(e.original_payload_truncated);
                    prop_assert!(before.original_payload_bytes.starts_with(&e.original_payload_bytes));
                }
                Fit::TooLarge { framed_len } => {
                    prop_assert!(framed_len > limit);
                    prop_assert_eq!(framed_len, len);
                }
            }
        }
    }
}
