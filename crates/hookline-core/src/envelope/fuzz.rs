//! Outside input never panics the DLQ envelope decoder nor makes it allocate what a datum
//! only claims: arbitrary bytes read with the v1 to v4 writer schemas, valid datums with
//! bytes edited and huge lengths spliced in, and record values of any shape. A decoded
//! envelope survives its own datum.

use apache_avro::Schema;
use apache_avro::error::Details;
use proptest::prelude::*;

use super::fixtures::{full, minimal};
use super::{DlqEnvelope, EnvelopeError};
use crate::fuzz::{avro_record, byte_edits, bytes, config, edited_bytes, edited_record, zigzag};
use crate::schema::dlq_envelope_schema;
use crate::schema::{
    DLQ_ENVELOPE_V1, DLQ_ENVELOPE_V2, DLQ_ENVELOPE_V3, DLQ_ENVELOPE_V4, MAX_AVRO_ALLOCATION_BYTES,
};

const FIELDS: &[&str] = &[
    "envelope_version",
    "event_id",
    "event_type",
    "endpoint_id",
    "endpoint_url",
    "original_topic",
    "original_partition",
    "original_offset",
    "original_key",
    "original_payload_bytes",
    "original_headers",
    "error_reason",
    "error_message",
    "last_status_code",
    "attempts",
    "first_attempt_at",
    "error_timestamp",
    "dispatcher_id",
    "trace_id",
    "original_payload_truncated",
    "original_payload_size",
    "tenant_id",
];

/// The writer schemas a DLQ record may have been written with.
fn writer(version: usize) -> Schema {
    match version {
        1 => Schema::parse_str(DLQ_ENVELOPE_V1).expect("v1"),
        2 => Schema::parse_str(DLQ_ENVELOPE_V2).expect("v2"),
        3 => Schema::parse_str(DLQ_ENVELOPE_V3).expect("v3"),
        4 => Schema::parse_str(DLQ_ENVELOPE_V4).expect("v4"),
        _ => dlq_envelope_schema().clone(),
    }
}

fn check_datum(datum: &[u8], writer: &Schema) -> Result<(), TestCaseError> {
    if let Ok(envelope) = DlqEnvelope::from_avro_datum(datum, writer) {
        check_envelope(envelope)?;
    }
    Ok(())
}

/// A decoded envelope is written again (as the dispatcher and the tools do) and reads back;
/// only a message over the limit or a count over `i32` changes on the way.
fn check_envelope(mut envelope: DlqEnvelope) -> Result<(), TestCaseError> {
    let _ = envelope.trace_id();
    let _ = envelope.avro_datum_len();
    let again = envelope
        .to_avro_datum()
        .expect("a decoded envelope encodes");
    let back = DlqEnvelope::from_avro_datum(&again, dlq_envelope_schema());
    envelope.error_message = super::truncate_message(&envelope.error_message).to_owned();
    envelope.attempts = envelope.attempts.min(i32::MAX as u32);
    prop_assert_eq!(back.ok(), Some(envelope));
    Ok(())
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn arbitrary_bytes(datum in bytes(), version in 1usize..=5) {
        check_datum(&datum, &writer(version))?;
    }

    #[test]
    fn valid_datums_with_edited_bytes(edits in byte_edits(4), full_one in any::<bool>()) {
        let envelope = if full_one { full() } else { minimal() };
        let datum = envelope.to_avro_datum().expect("encode");
        check_datum(&edited_bytes(&datum, &edits), dlq_envelope_schema())?;
    }

    #[test]
    fn records_of_any_shape(value in avro_record(FIELDS)) {
        if let Ok(envelope) = DlqEnvelope::from_avro_value(value) {
            check_envelope(envelope)?;
        }
    }

    #[test]
    fn valid_records_with_edited_fields(value in edited_record(full().to_avro_value())) {
        if let Ok(envelope) = DlqEnvelope::from_avro_value(value) {
            check_envelope(envelope)?;
        }
    }
}

/// A datum claiming a 2^60-byte `event_id` or 2^40 original headers is refused before
/// anything is allocated for them.
#[test]
fn claimed_lengths_past_the_bound_are_refused_before_allocating() {
    let refused = |datum: &[u8]| match DlqEnvelope::from_avro_datum(datum, dlq_envelope_schema()) {
        Err(EnvelopeError::Avro(e)) => matches!(
            e.details(),
            Details::MemoryAllocation { maximum, .. } if *maximum == MAX_AVRO_ALLOCATION_BYTES
        ),
        _ => false,
    };
    // envelope_version 4, then the event id's length.
    assert!(refused(&[zigzag(4), zigzag(1 << 60)].concat()));
    // Every field before the headers (ids, no URL, topic `t`, no key, empty payload), then
    // the headers array's first block count.
    let mut datum = [zigzag(4), zigzag(1), b"e".to_vec()].concat();
    datum.extend([0, 0, 0]);
    datum.extend([zigzag(1), b"t".to_vec(), zigzag(0), zigzag(0)].concat());
    datum.extend([0, 0]);
    let mut headers = datum.clone();
    headers.extend(zigzag(1 << 40));
    assert!(refused(&headers));
    // ... a count just within the bound is read item by item and runs out of bytes.
    datum.extend(zigzag(1_000));
    assert!(matches!(
        DlqEnvelope::from_avro_datum(&datum, dlq_envelope_schema()),
        Err(EnvelopeError::Avro(_))
    ));
}
