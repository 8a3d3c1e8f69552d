//! The Avro encoding of [`DlqEnvelope`]: written with the current schema
//! (`schemas/dlq_envelope.v5.avsc`), bare or Confluent-framed with a known schema id, and
//! read from values of version 1, 2, 3 or 4.

use apache_avro::Schema;
use apache_avro::types::Value;

use super::{DlqEnvelope, DlqHeader, EnvelopeError, ErrorReason, truncate_message};
use crate::avro_util::{CachedWriter, FieldProblem, RecordFields, decode, nullable};

/// The DLQ envelope schema's writer, built once.
static WRITER: CachedWriter = CachedWriter::new();
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
            (
                "original_payload_truncated".into(),
                Value::Boolean(self.original_payload_truncated),
            ),
            (
                "original_payload_size".into(),
                nullable(
                    self.original_payload_size
                        .map(|size| Value::Long(i64::try_from(size).unwrap_or(i64::MAX))),
                ),
            ),
            ("tenant_id".into(), string(&self.tenant_id)),
        ])
    }

    /// Reads an envelope from an Avro record value of the v1, v2, v3 or v4 schema; unions may
    /// be wrapped or not, and timestamps may be `long` or `timestamp-millis`. The v2
    /// `trace_id` field is not read: [`DlqEnvelope::trace_id`] derives it from the original
    /// headers. Without the v3 fields (a v1 or v2 value) the payload reads as not truncated;
    /// without the v4 field (a v1 to v3 value) the tenant is `None`.
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
        let original_payload_size = f
            .opt_long("original_payload_size")?
            .map(|size| {
                u64::try_from(size).map_err(|_| EnvelopeError::OutOfRange {
                    field: "original_payload_size",
                    value: size,
                })
            })
            .transpose()?;
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
            original_payload_truncated: f.opt_bool("original_payload_truncated")?.unwrap_or(false),
            original_payload_size,
            tenant_id: f.opt_string("tenant_id")?,
        })
    }

    /// The envelope as an Avro datum (no container, no registry framing) of the current schema.
    pub fn to_avro_datum(&self) -> Result<Vec<u8>, EnvelopeError> {
        WRITER
            .encode(dlq_envelope_schema(), self.to_avro_value())
            .map_err(EnvelopeError::Avro)
    }

    /// The envelope as a Confluent-framed value, as a registry-aware reader expects it:
    /// magic byte 0, `schema_id` as 4 big-endian bytes, then the Avro datum of the current
    /// schema. `schema_id` must be the id the registry gave
    /// [`DLQ_ENVELOPE_CURRENT`](crate::schema::DLQ_ENVELOPE_CURRENT) under the DLQ's subject
    /// (registered once at start-up), so no registry call is needed per record.
    pub fn to_framed_avro(&self, schema_id: u32) -> Result<Vec<u8>, EnvelopeError> {
        let mut out = crate::framing::start(schema_id, self.avro_datum_len());
        WRITER
            .encode_into(dlq_envelope_schema(), self.to_avro_value(), &mut out)
            .map_err(EnvelopeError::Avro)?;
        Ok(out)
    }

    /// Decodes an Avro datum written with `writer_schema` (e.g. fetched from the registry
    /// by the framed schema id), resolving it into the current schema: a v1, v2 or v3 datum
    /// gets the later fields' defaults.
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
mod tests;
