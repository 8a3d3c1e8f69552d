//! The Avro encoding of [`DlqEnvelope`]: written with the current schema
//! (`schemas/dlq_envelope.v2.avsc`), read from values of version 1 or 2.

use apache_avro::Schema;
use apache_avro::types::Value;

use super::{DlqEnvelope, DlqHeader, EnvelopeError, ErrorReason, truncate_message};
use crate::avro_util::{FieldProblem, RecordFields, decode, encode, nullable};
use crate::schema::dlq_envelope_schema;

impl From<FieldProblem> for EnvelopeError {
    fn from(p: FieldProblem) -> Self {
        match p {
            FieldProblem::NotARecord => EnvelopeError::NotARecord,
            FieldProblem::Missing { field } => EnvelopeError::MissingField { field },
            FieldProblem::WrongType { field, expected } => {
                EnvelopeError::WrongType { field, expected }
            }
        }
    }
}

impl DlqEnvelope {
    /// The envelope as an Avro value of the current `DlqEnvelope` schema,
    /// [`DLQ_ENVELOPE_CURRENT`](crate::schema::DLQ_ENVELOPE_CURRENT) (the error message cut
    /// to [`MAX_ERROR_MESSAGE_LEN`](super::MAX_ERROR_MESSAGE_LEN) bytes, `trace_id` from
    /// [`DlqEnvelope::trace_id`]). It does not fit the v1 schema.
    pub fn to_avro_value(&self) -> Value {
        let headers = self
            .original_headers
            .iter()
            .map(|h| {
                Value::Record(vec![
                    ("key".into(), Value::String(h.key.clone())),
                    ("value".into(), nullable(h.value.clone().map(Value::Bytes))),
                ])
            })
            .collect();
        let string = |s: &Option<String>| nullable(s.clone().map(Value::String));
        Value::Record(vec![
            ("envelope_version".into(), Value::Int(self.envelope_version)),
            ("event_id".into(), Value::String(self.event_id.clone())),
            ("event_type".into(), string(&self.event_type)),
            ("endpoint_id".into(), string(&self.endpoint_id)),
            ("endpoint_url".into(), string(&self.endpoint_url)),
            (
                "original_topic".into(),
                Value::String(self.original_topic.clone()),
            ),
            (
                "original_partition".into(),
                Value::Int(self.original_partition),
            ),
            ("original_offset".into(), Value::Long(self.original_offset)),
            (
                "original_key".into(),
                nullable(self.original_key.clone().map(Value::Bytes)),
            ),
            (
                "original_payload_bytes".into(),
                Value::Bytes(self.original_payload_bytes.clone()),
            ),
            ("original_headers".into(), Value::Array(headers)),
            (
                "error_reason".into(),
                Value::Enum(self.error_reason.index(), self.error_reason.symbol().into()),
            ),
            (
                "error_message".into(),
                Value::String(truncate_message(&self.error_message).to_owned()),
            ),
            (
                "last_status_code".into(),
                nullable(self.last_status_code.map(|s| Value::Int(i32::from(s)))),
            ),
            (
                "attempts".into(),
                Value::Int(i32::try_from(self.attempts).unwrap_or(i32::MAX)),
            ),
            (
                "first_attempt_at".into(),
                nullable(self.first_attempt_at_ms.map(Value::TimestampMillis)),
            ),
            (
                "error_timestamp".into(),
                Value::TimestampMillis(self.error_timestamp_ms),
            ),
            (
                "dispatcher_id".into(),
                Value::String(self.dispatcher_id.clone()),
            ),
            (
                "trace_id".into(),
                nullable(self.trace_id().map(|id| Value::String(id.to_owned()))),
            ),
        ])
    }

    /// Reads an envelope from an Avro record value of the v1 or v2 schema; unions may be
    /// wrapped or not, and timestamps may be `long` or `timestamp-millis`. The v2 `trace_id`
    /// field is not read: [`DlqEnvelope::trace_id`] derives it from the original headers.
    pub fn from_avro_value(value: Value) -> Result<Self, EnvelopeError> {
        let mut f = RecordFields::new(value)?;
        let original_headers = match f.take("original_headers") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|item| {
                    let mut h = RecordFields::new(item).map_err(|_| EnvelopeError::WrongType {
                        field: "original_headers",
                        expected: "an array of header records",
                    })?;
                    Ok(DlqHeader {
                        key: h.string("key")?,
                        value: h.opt_bytes("value")?,
                    })
                })
                .collect::<Result<_, EnvelopeError>>()?,
            Some(_) => {
                return Err(EnvelopeError::WrongType {
                    field: "original_headers",
                    expected: "an array of header records",
                });
            }
        };
        let error_reason =
            match f.take("error_reason") {
                Some(Value::Enum(_, symbol) | Value::String(symbol)) => symbol
                    .parse::<ErrorReason>()
                    .map_err(EnvelopeError::Reason)?,
                Some(_) => {
                    return Err(EnvelopeError::WrongType {
                        field: "error_reason",
                        expected: "an ErrorReason enum symbol",
                    });
                }
                None => {
                    return Err(EnvelopeError::MissingField {
                        field: "error_reason",
                    });
                }
            };
        let last_status_code = f
            .opt_int("last_status_code")?
            .map(|s| {
                u16::try_from(s).map_err(|_| EnvelopeError::OutOfRange {
                    field: "last_status_code",
                    value: i64::from(s),
                })
            })
            .transpose()?;
        let attempts = f.int("attempts")?;
        Ok(DlqEnvelope {
            envelope_version: f.int("envelope_version")?,
            event_id: f.string("event_id")?,
            event_type: f.opt_string("event_type")?,
            endpoint_id: f.opt_string("endpoint_id")?,
            endpoint_url: f.opt_string("endpoint_url")?,
            original_topic: f.string("original_topic")?,
            original_partition: f.int("original_partition")?,
            original_offset: f.long("original_offset")?,
            original_key: f.opt_bytes("original_key")?,
            original_payload_bytes: f.bytes("original_payload_bytes")?,
            original_headers,
            error_reason,
            error_message: f.string("error_message")?,
            last_status_code,
            attempts: u32::try_from(attempts).map_err(|_| EnvelopeError::OutOfRange {
                field: "attempts",
                value: i64::from(attempts),
            })?,
            first_attempt_at_ms: f.opt_long("first_attempt_at")?,
            error_timestamp_ms: f.long("error_timestamp")?,
            dispatcher_id: f.string("dispatcher_id")?,
        })
    }

    /// The envelope as an Avro datum (no container, no registry framing) of the current schema.
    pub fn to_avro_datum(&self) -> Result<Vec<u8>, EnvelopeError> {
        encode(dlq_envelope_schema(), self.to_avro_value()).map_err(EnvelopeError::Avro)
    }

    /// Decodes an Avro datum written with `writer_schema` (e.g. fetched from the registry
    /// by the framed schema id), resolving it into the current schema: a v1 datum gets the
    /// v2 fields' defaults.
    pub fn from_avro_datum(datum: &[u8], writer_schema: &Schema) -> Result<Self, EnvelopeError> {
        let (value, rest) =
            decode(datum, writer_schema, dlq_envelope_schema()).map_err(EnvelopeError::Avro)?;
        if rest > 0 {
            return Err(EnvelopeError::TrailingBytes(rest));
        }
        Self::from_avro_value(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{ENVELOPE_VERSION, MAX_ERROR_MESSAGE_LEN, derived_event_id};
    use crate::schema::DLQ_ENVELOPE_V1;

    const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";

    fn full() -> DlqEnvelope {
        DlqEnvelope {
            envelope_version: ENVELOPE_VERSION,
            event_id: "evt_1".into(),
            event_type: Some("invoice.paid".into()),
            endpoint_id: Some("ep_1".into()),
            endpoint_url: Some("https://example.com/hook".into()),
            original_topic: "webhook-events".into(),
            original_partition: 2,
            original_offset: 12_345,
            original_key: Some(b"ep_1".to_vec()),
            original_payload_bytes: vec![0, 0, 0, 0, 1, 2, 3],
            original_headers: vec![
                DlqHeader {
                    key: "traceparent".into(),
                    value: Some(TRACEPARENT.as_bytes().to_vec()),
                },
                DlqHeader {
                    key: "x".into(),
                    value: None,
                },
                DlqHeader {
                    key: "x".into(),
                    value: Some(b"again".to_vec()),
                },
            ],
            error_reason: ErrorReason::RetriesExhausted,
            error_message: "HTTP 503".into(),
            last_status_code: Some(503),
            attempts: 8,
            first_attempt_at_ms: Some(1_700_000_000_000),
            error_timestamp_ms: 1_700_000_100_000,
            dispatcher_id: "dispatcher-0".into(),
        }
    }

    fn minimal() -> DlqEnvelope {
        DlqEnvelope {
            envelope_version: ENVELOPE_VERSION,
            event_id: derived_event_id("webhook-events", 0, 7),
            event_type: None,
            endpoint_id: None,
            endpoint_url: None,
            original_topic: "webhook-events".into(),
            original_partition: 0,
            original_offset: 7,
            original_key: None,
            original_payload_bytes: b"not json".to_vec(),
            original_headers: vec![],
            error_reason: ErrorReason::MalformedEvent,
            error_message: "invalid JSON event".into(),
            last_status_code: None,
            attempts: 0,
            first_attempt_at_ms: None,
            error_timestamp_ms: 1,
            dispatcher_id: "d".into(),
        }
    }

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

    /// `e` as a value of the v1 schema: the current value without the fields v2 added.
    fn v1_value(e: &DlqEnvelope) -> Value {
        let Value::Record(fields) = e.to_avro_value() else {
            panic!("not a record");
        };
        Value::Record(
            fields
                .into_iter()
                .filter(|(k, _)| k != "trace_id")
                .collect(),
        )
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
            assert_eq!(field(&value, "envelope_version"), Value::Int(2));
        }
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

    /// A record written with v1 before the upgrade, read by a v2 reader through Avro schema
    /// resolution, as a consumer with the v2 schema reads the DLQ's older records.
    #[test]
    fn a_v1_datum_decodes_with_the_v2_reader_and_gets_the_defaults() {
        let v1 = Schema::parse_str(DLQ_ENVELOPE_V1).expect("v1 schema");
        for e in [full(), minimal()] {
            let old = DlqEnvelope {
                envelope_version: 1,
                ..e
            };
            let datum = encode(&v1, v1_value(&old)).expect("encode with v1");
            let (value, rest) = decode(&datum, &v1, dlq_envelope_schema()).expect("resolve");
            assert_eq!(rest, 0);
            assert!(value.validate(dlq_envelope_schema()));
            assert_eq!(
                field(&value, "trace_id"),
                Value::Union(0, Box::new(Value::Null)),
                "the v2 default"
            );
            assert_eq!(DlqEnvelope::from_avro_value(value).expect("read"), old);
            assert_eq!(
                DlqEnvelope::from_avro_datum(&datum, &v1).expect("decode"),
                old
            );
        }
        // Without resolution (a registry-aware reader using the writer schema) too.
        let datum = encode(&v1, v1_value(&minimal())).expect("encode with v1");
        let (value, _) = decode(&datum, &v1, &v1).expect("decode");
        assert_eq!(
            DlqEnvelope::from_avro_value(value).expect("read"),
            minimal()
        );
    }

    #[test]
    fn a_v2_value_does_not_fit_the_v1_schema() {
        let v1 = Schema::parse_str(DLQ_ENVELOPE_V1).expect("v1 schema");
        assert!(!full().to_avro_value().validate(&v1));
        assert!(v1_value(&full()).validate(&v1));
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
        let (value, _) =
            decode(&datum, dlq_envelope_schema(), dlq_envelope_schema()).expect("decode");
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
}
