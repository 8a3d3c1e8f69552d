use super::*;
use crate::avro_util::encode;
use crate::envelope::fixtures::{TRACE_ID, TRACEPARENT, full, minimal};
use crate::envelope::{ENVELOPE_VERSION, MAX_ERROR_MESSAGE_LEN};
use crate::schema::{DLQ_ENVELOPE_V1, DLQ_ENVELOPE_V2, DLQ_ENVELOPE_V3, DLQ_ENVELOPE_V4};

fn round_trip(e: &DlqEnvelope) -> DlqEnvelope {
    let datum = e.to_avro_datum().expect("encode");
    DlqEnvelope::from_avro_datum(&datum, dlq_envelope_schema()).expect("decode")
}

#[test]
fn full_and_minimal_round_trip_through_the_schema() {
    for e in [full(), minimal()] {
        assert!(e.to_avro_value().validate(dlq_envelope_schema()));
        assert_eq!(round_trip(&e), e);
    }
}

/// The value of field `name` in a decoded record.
fn field(value: &Value, name: &str) -> Value {
    let Value::Record(fields) = value else {
        panic!("not a record");
    };
    let (_, v) = fields.iter().find(|(k, _)| k == name).expect("the field");
    v.clone()
}

/// The fields version 2 added to version 1, version 3 to version 2, and version 4 to
/// version 3.
const V2_FIELDS: [&str; 1] = ["trace_id"];
const V3_FIELDS: [&str; 2] = ["original_payload_truncated", "original_payload_size"];
const V4_FIELDS: [&str; 1] = ["tenant_id"];

/// `e` as a value of an older schema: the current value without the `later` fields.
fn older_value(e: &DlqEnvelope, later: &[&str]) -> Value {
    let Value::Record(fields) = e.to_avro_value() else {
        panic!("not a record");
    };
    Value::Record(
        fields
            .into_iter()
            .filter(|(k, _)| !later.contains(&k.as_str()))
            .collect(),
    )
}

/// How a test builds an envelope's value under an older schema.
type ValueOf = fn(&DlqEnvelope) -> Value;

/// `e` as a value of the v1 schema.
fn v1_value(e: &DlqEnvelope) -> Value {
    older_value(e, &[&V2_FIELDS[..], &V3_FIELDS, &V4_FIELDS].concat())
}

/// `e` as a value of the v2 schema.
fn v2_value(e: &DlqEnvelope) -> Value {
    older_value(e, &[&V3_FIELDS[..], &V4_FIELDS].concat())
}

/// `e` as a value of the v3 schema.
fn v3_value(e: &DlqEnvelope) -> Value {
    older_value(e, &V4_FIELDS)
}

/// A cut envelope: what `fit_within` leaves.
fn truncated() -> DlqEnvelope {
    DlqEnvelope {
        original_payload_bytes: vec![0, 0, 0, 0, 1],
        original_payload_truncated: true,
        original_payload_size: Some(1_500_000),
        ..full()
    }
}

#[test]
fn v2_writes_the_trace_id_of_the_traceparent_header() {
    assert_eq!(full().trace_id(), Some(TRACE_ID));
    assert_eq!(minimal().trace_id(), None);
    for (e, expected) in [
        (
            full(),
            Value::Union(1, Box::new(Value::String(TRACE_ID.into()))),
        ),
        (minimal(), Value::Union(0, Box::new(Value::Null))),
    ] {
        let datum = e.to_avro_datum().expect("encode");
        let (value, _) =
            decode(&datum, dlq_envelope_schema(), dlq_envelope_schema()).expect("decode");
        assert_eq!(field(&value, "trace_id"), expected);
        assert_eq!(
            field(&value, "envelope_version"),
            Value::Int(ENVELOPE_VERSION)
        );
    }
}

#[test]
fn v3_writes_whether_and_from_what_size_the_payload_was_cut() {
    for (e, flag, size) in [
        (full(), false, Value::Union(0, Box::new(Value::Null))),
        (
            truncated(),
            true,
            Value::Union(1, Box::new(Value::Long(1_500_000))),
        ),
    ] {
        assert!(e.to_avro_value().validate(dlq_envelope_schema()));
        let datum = e.to_avro_datum().expect("encode");
        let (value, _) =
            decode(&datum, dlq_envelope_schema(), dlq_envelope_schema()).expect("decode");
        assert_eq!(
            field(&value, "original_payload_truncated"),
            Value::Boolean(flag)
        );
        assert_eq!(field(&value, "original_payload_size"), size);
        assert_eq!(round_trip(&e), e);
    }
    // A size beyond Avro's long is written as the largest long, never wrapped.
    let huge = DlqEnvelope {
        original_payload_size: Some(u64::MAX),
        ..truncated()
    };
    assert_eq!(
        field(&huge.to_avro_value(), "original_payload_size"),
        Value::Union(1, Box::new(Value::Long(i64::MAX)))
    );
}

#[test]
fn an_invalid_or_missing_traceparent_gives_no_trace_id() {
    let with = |value: Option<&[u8]>| DlqEnvelope {
        original_headers: vec![DlqHeader {
            key: "traceparent".into(),
            value: value.map(<[u8]>::to_vec),
        }],
        ..minimal()
    };
    assert_eq!(with(Some(b"00-abc-def-01")).trace_id(), None);
    assert_eq!(with(Some(&[0xff, 0xfe])).trace_id(), None);
    assert_eq!(with(None).trace_id(), None);
    assert_eq!(
        with(Some(TRACEPARENT.as_bytes())).trace_id(),
        Some(TRACE_ID)
    );
}

#[test]
fn v4_writes_the_tenant() {
    for (e, expected) in [
        (
            full(),
            Value::Union(1, Box::new(Value::String("acme".into()))),
        ),
        (minimal(), Value::Union(0, Box::new(Value::Null))),
    ] {
        assert!(e.to_avro_value().validate(dlq_envelope_schema()));
        let datum = e.to_avro_datum().expect("encode");
        let (value, _) =
            decode(&datum, dlq_envelope_schema(), dlq_envelope_schema()).expect("decode");
        assert_eq!(field(&value, "tenant_id"), expected);
        assert_eq!(round_trip(&e), e);
    }
    assert_eq!(round_trip(&full()).tenant_id.as_deref(), Some("acme"));
}

/// A record written with an older schema before the upgrade, read by the current reader
/// through Avro schema resolution, as a consumer with the v4 schema reads the DLQ's
/// older records: the later fields get their defaults, the payload is not truncated and
/// there is no tenant.
#[test]
fn v1_to_v4_datums_decode_with_the_v5_reader_and_get_the_defaults() {
    let v1 = Schema::parse_str(DLQ_ENVELOPE_V1).expect("v1 schema");
    let v2 = Schema::parse_str(DLQ_ENVELOPE_V2).expect("v2 schema");
    let v3 = Schema::parse_str(DLQ_ENVELOPE_V3).expect("v3 schema");
    let v4 = Schema::parse_str(DLQ_ENVELOPE_V4).expect("v4 schema");
    let older: [(i32, &Schema, ValueOf); 4] = [
        (1, &v1, v1_value),
        (2, &v2, v2_value),
        (3, &v3, v3_value),
        (4, &v4, DlqEnvelope::to_avro_value),
    ];
    for (version, schema, value_of) in older {
        for e in [full(), minimal()] {
            let old = DlqEnvelope {
                envelope_version: version,
                tenant_id: None,
                ..e
            };
            let datum = encode(schema, value_of(&old)).expect("encode with the old schema");
            let (value, rest) = decode(&datum, schema, dlq_envelope_schema()).expect("resolve");
            assert_eq!(rest, 0);
            assert!(value.validate(dlq_envelope_schema()));
            assert_eq!(
                field(&value, "original_payload_truncated"),
                Value::Boolean(false),
                "the v3 default"
            );
            assert_eq!(
                field(&value, "original_payload_size"),
                Value::Union(0, Box::new(Value::Null)),
                "the v3 default"
            );
            assert_eq!(
                field(&value, "tenant_id"),
                Value::Union(0, Box::new(Value::Null)),
                "the v4 default"
            );
            if version == 1 {
                assert_eq!(
                    field(&value, "trace_id"),
                    Value::Union(0, Box::new(Value::Null)),
                    "the v2 default"
                );
            }
            assert_eq!(DlqEnvelope::from_avro_value(value).expect("read"), old);
            assert_eq!(
                DlqEnvelope::from_avro_datum(&datum, schema).expect("decode"),
                old
            );
        }
        // Without resolution (a registry-aware reader using the writer schema) too.
        let datum = encode(schema, value_of(&minimal())).expect("encode with the old schema");
        let (value, _) = decode(&datum, schema, schema).expect("decode");
        let read = DlqEnvelope::from_avro_value(value).expect("read");
        assert_eq!(read, minimal());
        assert!(!read.original_payload_truncated);
        assert_eq!(read.original_payload_size, None);
    }
}

#[test]
fn a_v4_value_fits_no_older_schema() {
    let v1 = Schema::parse_str(DLQ_ENVELOPE_V1).expect("v1 schema");
    let v2 = Schema::parse_str(DLQ_ENVELOPE_V2).expect("v2 schema");
    let v3 = Schema::parse_str(DLQ_ENVELOPE_V3).expect("v3 schema");
    for older in [&v1, &v2, &v3] {
        assert!(!full().to_avro_value().validate(older));
    }
    assert!(v1_value(&full()).validate(&v1));
    assert!(v2_value(&full()).validate(&v2));
    assert!(v3_value(&full()).validate(&v3));
}

/// A v4 record (the same fields) keeps its reason under the v5 reader; a record parked
/// as expired or cancelled is not a v4 value, as a v4 reader cannot know the symbol.
#[test]
fn v4_reasons_keep_their_meaning_and_v5_reasons_fit_only_v5() {
    let v4 = Schema::parse_str(DLQ_ENVELOPE_V4).expect("v4 schema");
    for reason in ErrorReason::ALL {
        let e = DlqEnvelope {
            error_reason: reason,
            envelope_version: 4,
            ..full()
        };
        let new = matches!(reason, ErrorReason::Expired | ErrorReason::Cancelled);
        assert_eq!(e.to_avro_value().validate(&v4), !new, "{reason}");
        if !new {
            let datum = encode(&v4, e.to_avro_value()).expect("a v4 datum");
            let read = DlqEnvelope::from_avro_datum(&datum, &v4).expect("v5 reads v4");
            assert_eq!(read, e);
        }
    }
    for reason in [ErrorReason::Expired, ErrorReason::Cancelled] {
        let e = DlqEnvelope {
            error_reason: reason,
            ..full()
        };
        assert_eq!(round_trip(&e), e);
    }
}

#[test]
fn every_reason_round_trips() {
    for reason in ErrorReason::ALL {
        let e = DlqEnvelope {
            error_reason: reason,
            ..minimal()
        };
        assert_eq!(round_trip(&e).error_reason, reason);
    }
}

#[test]
fn long_messages_are_cut() {
    let e = DlqEnvelope {
        error_message: "x".repeat(MAX_ERROR_MESSAGE_LEN + 10),
        ..minimal()
    };
    assert_eq!(round_trip(&e).error_message.len(), MAX_ERROR_MESSAGE_LEN);
}

#[test]
fn decoded_generic_values_are_accepted() {
    let datum = full().to_avro_datum().expect("encode");
    let (value, _) = decode(&datum, dlq_envelope_schema(), dlq_envelope_schema()).expect("decode");
    assert_eq!(DlqEnvelope::from_avro_value(value).expect("read"), full());
}

#[test]
fn out_of_range_and_unknown_values_are_errors() {
    let with = |name: &str, v: Value| {
        let Value::Record(mut fields) = full().to_avro_value() else {
            panic!("not a record");
        };
        for (k, slot) in &mut fields {
            if k == name {
                *slot = v.clone();
            }
        }
        DlqEnvelope::from_avro_value(Value::Record(fields))
    };
    assert!(matches!(
        with("attempts", Value::Int(-1)),
        Err(EnvelopeError::OutOfRange {
            field: "attempts",
            ..
        })
    ));
    assert!(matches!(
        with("last_status_code", Value::Int(70_000)),
        Err(EnvelopeError::OutOfRange {
            field: "last_status_code",
            ..
        })
    ));
    assert!(matches!(
        with(
            "original_payload_size",
            Value::Union(1, Box::new(Value::Long(-1)))
        ),
        Err(EnvelopeError::OutOfRange {
            field: "original_payload_size",
            value: -1
        })
    ));
    assert!(matches!(
        with("original_payload_truncated", Value::Int(1)),
        Err(EnvelopeError::WrongType {
            field: "original_payload_truncated",
            ..
        })
    ));
    assert!(matches!(
        with("error_reason", Value::Enum(0, "NOPE".into())),
        Err(EnvelopeError::Reason(_))
    ));
    assert!(matches!(
        with("original_offset", Value::String("1".into())),
        Err(EnvelopeError::WrongType {
            field: "original_offset",
            ..
        })
    ));
    assert!(matches!(
        DlqEnvelope::from_avro_value(Value::Int(1)),
        Err(EnvelopeError::NotARecord)
    ));
    let mut datum = full().to_avro_datum().expect("encode");
    datum.extend_from_slice(&[1, 2]);
    assert!(matches!(
        DlqEnvelope::from_avro_datum(&datum, dlq_envelope_schema()),
        Err(EnvelopeError::TrailingBytes(2))
    ));
}
