//! The attempt log's record: one step of an event's delivery history (an HTTP attempt, a
//! retry or deferral to a tier, a park, a fan-out), its Avro form, the bounded and redacted
//! response excerpt, and the partition its key lands in. Pure: no I/O.

use apache_avro::Schema;
use apache_avro::types::Value;

use crate::avro_util::{FieldProblem, RecordFields, decode, nullable};
use crate::schema::webhook_attempt_schema;
use crate::url_guard::redact_url;

/// What an attempt-log record says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptKind {
    /// One HTTP attempt was made.
    Attempt,
    /// After a failed attempt the event was written to a retry tier.
    RetryScheduled,
    /// Put off to a tier without spending an attempt (an open breaker, a rate limit...).
    Deferred,
    /// Written to the DLQ.
    Parked,
    /// A tenant event became deliveries.
    FannedOut,
}

impl AttemptKind {
    const ALL: [AttemptKind; 5] = [
        AttemptKind::Attempt,
        AttemptKind::RetryScheduled,
        AttemptKind::Deferred,
        AttemptKind::Parked,
        AttemptKind::FannedOut,
    ];

    /// The Avro enum symbol (also the name shown by `hookline events show`).
    pub fn symbol(self) -> &'static str {
        match self {
            AttemptKind::Attempt => "attempt",
            AttemptKind::RetryScheduled => "retry_scheduled",
            AttemptKind::Deferred => "deferred",
            AttemptKind::Parked => "parked",
            AttemptKind::FannedOut => "fanned_out",
        }
    }

    fn index(self) -> u32 {
        match self {
            AttemptKind::Attempt => 0,
            AttemptKind::RetryScheduled => 1,
            AttemptKind::Deferred => 2,
            AttemptKind::Parked => 3,
            AttemptKind::FannedOut => 4,
        }
    }

    /// The kind of an Avro enum symbol.
    pub fn from_symbol(symbol: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.symbol() == symbol)
    }
}

/// One record of the attempt log (schema `webhook_attempt.v2.avsc`; version 1 records read
/// with the version 2 fields `None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptRecord {
    /// The event id; also the record key.
    pub event_id: String,
    /// The tenant of a fanned-out event.
    pub tenant_id: Option<String>,
    /// The endpoint delivered to.
    pub endpoint_id: Option<String>,
    /// What happened.
    pub kind: AttemptKind,
    /// This attempt's number (kind `Attempt`), else the attempts made so far.
    pub attempt: u32,
    /// When, in epoch milliseconds.
    pub timestamp_ms: i64,
    /// How long the HTTP attempt took.
    pub duration_ms: Option<i64>,
    /// The HTTP status, when there was an answer.
    pub http_status: Option<u16>,
    /// The classification of a failed attempt.
    pub error_kind: Option<String>,
    /// The start of the response body, bounded and redacted ([`excerpt`]).
    pub response_excerpt: Option<String>,
    /// The retry tier (suffix) of a retry or deferral.
    pub tier: Option<String>,
    /// Why: the DLQ reason code, the retry's classification, the deferral's cause.
    pub reason: Option<String>,
    /// How many deliveries a tenant event became.
    pub deliveries: Option<u32>,
    /// The dispatcher replica that wrote it.
    pub dispatcher_id: String,
    /// The W3C trace id.
    pub trace_id: Option<String>,
    /// When the event was first published (its Kafka timestamp), epoch milliseconds.
    pub published_at_ms: Option<i64>,
    /// The DLQ record (`<dlq topic>/<partition>/<offset>`) this delivery was redriven from.
    pub redriven_from: Option<String>,
}

/// Why an attempt-log record could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
pub enum AttemptLogError {
    /// The Avro encoder or decoder failed.
    #[error("attempt record Avro: {0}")]
    Avro(#[source] apache_avro::Error),
    /// The datum is not a record of the schema.
    #[error("attempt record: {0:?}")]
    Field(FieldProblemView),
    /// A field's value is out of its range.
    #[error("attempt record field {field} is out of range")]
    OutOfRange {
        /// The field.
        field: &'static str,
    },
    /// Bytes were left after the datum.
    #[error("attempt record: {0} bytes after the datum")]
    TrailingBytes(usize),
    /// The value is not Confluent-framed.
    #[error("attempt record: not a registry-framed value")]
    NotFramed,
}

/// A decoding problem, by field name (never a value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldProblemView(String);

impl From<FieldProblem> for AttemptLogError {
    fn from(problem: FieldProblem) -> Self {
        let text = match problem {
            FieldProblem::NotARecord => "not a record".to_owned(),
            FieldProblem::Missing { field } => format!("missing field {field}"),
            FieldProblem::WrongType { field, expected } => {
                format!("field {field} is not {expected}")
            }
        };
        AttemptLogError::Field(FieldProblemView(text))
    }
}

/// A count as the schema's `int`: at most `i32::MAX`.
fn avro_int(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn opt_str(value: &Option<String>) -> Value {
    nullable(value.clone().map(Value::String))
}

impl AttemptRecord {
    /// The record as an Avro value of the current attempt schema.
    pub fn to_avro_value(&self) -> Value {
        Value::Record(vec![
            ("event_id".into(), Value::String(self.event_id.clone())),
            ("tenant_id".into(), opt_str(&self.tenant_id)),
            ("endpoint_id".into(), opt_str(&self.endpoint_id)),
            (
                "kind".into(),
                Value::Enum(self.kind.index(), self.kind.symbol().into()),
            ),
            ("attempt".into(), Value::Int(avro_int(self.attempt))),
            (
                "timestamp".into(),
                Value::TimestampMillis(self.timestamp_ms),
            ),
            (
                "duration_ms".into(),
                nullable(self.duration_ms.map(Value::Long)),
            ),
            (
                "http_status".into(),
                nullable(self.http_status.map(|s| Value::Int(i32::from(s)))),
            ),
            ("error_kind".into(), opt_str(&self.error_kind)),
            ("response_excerpt".into(), opt_str(&self.response_excerpt)),
            ("tier".into(), opt_str(&self.tier)),
            ("reason".into(), opt_str(&self.reason)),
            (
                "deliveries".into(),
                nullable(self.deliveries.map(|n| Value::Int(avro_int(n)))),
            ),
            (
                "dispatcher_id".into(),
                Value::String(self.dispatcher_id.clone()),
            ),
            ("trace_id".into(), opt_str(&self.trace_id)),
            (
                "published_at".into(),
                nullable(self.published_at_ms.map(Value::TimestampMillis)),
            ),
            ("redriven_from".into(), opt_str(&self.redriven_from)),
        ])
    }

    /// The record as a Confluent-framed value: magic byte 0, `schema_id` (the id the
    /// registry gave the attempt schema at start-up) big-endian, then the Avro datum,
    /// written field by field ([`datum`]; the same bytes as apache-avro's encoding of
    /// [`AttemptRecord::to_avro_value`], as a property test checks). No record fails to
    /// encode today; the `Result` is the log's contract with its writer, which counts
    /// failures.
    pub fn to_framed_avro(&self, schema_id: u32) -> Result<Vec<u8>, AttemptLogError> {
        let mut out = crate::framing::start(schema_id, 160);
        datum::write(self, &mut out);
        Ok(out)
    }

    /// The schema id of a framed value, and its datum.
    pub fn split_framed(framed: &[u8]) -> Result<(u32, &[u8]), AttemptLogError> {
        crate::framing::split(framed).ok_or(AttemptLogError::NotFramed)
    }

    /// Decodes a datum written with `writer_schema` (fetched from the registry by the
    /// framed schema id), resolved into the current schema.
    pub fn from_avro_datum(datum: &[u8], writer_schema: &Schema) -> Result<Self, AttemptLogError> {
        let (value, rest) = decode(datum, writer_schema, webhook_attempt_schema())
            .map_err(AttemptLogError::Avro)?;
        if rest > 0 {
            return Err(AttemptLogError::TrailingBytes(rest));
        }
        Self::from_avro_value(value)
    }

    /// Reads a record from an Avro value of any version of the attempt schema (as the
    /// registry client decodes it with its writer schema): fields a version lacks are
    /// `None`.
    pub fn from_avro_value(value: Value) -> Result<Self, AttemptLogError> {
        let mut f = RecordFields::new(value)?;
        let kind = match f.take("kind") {
            Some(Value::Enum(_, symbol) | Value::String(symbol)) => {
                AttemptKind::from_symbol(&symbol).ok_or(FieldProblem::WrongType {
                    field: "kind",
                    expected: "an AttemptKind symbol",
                })?
            }
            Some(_) => {
                return Err(FieldProblem::WrongType {
                    field: "kind",
                    expected: "an AttemptKind symbol",
                }
                .into());
            }
            None => return Err(FieldProblem::Missing { field: "kind" }.into()),
        };
        let attempt = u32::try_from(f.int("attempt")?)
            .map_err(|_| AttemptLogError::OutOfRange { field: "attempt" })?;
        let http_status = f
            .opt_int("http_status")?
            .map(|s| {
                u16::try_from(s).map_err(|_| AttemptLogError::OutOfRange {
                    field: "http_status",
                })
            })
            .transpose()?;
        let deliveries = f
            .opt_int("deliveries")?
            .map(|n| {
                u32::try_from(n).map_err(|_| AttemptLogError::OutOfRange {
                    field: "deliveries",
                })
            })
            .transpose()?;
        Ok(AttemptRecord {
            event_id: f.string("event_id")?,
            tenant_id: f.opt_string("tenant_id")?,
            endpoint_id: f.opt_string("endpoint_id")?,
            kind,
            attempt,
            timestamp_ms: f.long("timestamp")?,
            duration_ms: f.opt_long("duration_ms")?,
            http_status,
            error_kind: f.opt_string("error_kind")?,
            response_excerpt: f.opt_string("response_excerpt")?,
            tier: f.opt_string("tier")?,
            reason: f.opt_string("reason")?,
            deliveries,
            dispatcher_id: f.string("dispatcher_id")?,
            trace_id: f.opt_string("trace_id")?,
            published_at_ms: f.opt_long("published_at")?,
            redriven_from: f.opt_string("redriven_from")?,
        })
    }
}

/// The start of a response body fit for the attempt log: at most `max_bytes` bytes of
/// UTF-8 (cut at a character boundary; invalid bytes replaced), every URL in it redacted
/// (no user info, no query string, no fragment: they may carry tokens). `None` for an empty
/// body or a zero bound.
pub fn excerpt(body: &[u8], max_bytes: usize) -> Option<String> {
    if body.is_empty() || max_bytes == 0 {
        return None;
    }
    // Read a little past the bound so that a URL cut by it is still seen whole.
    let window = &body[..body.len().min(max_bytes.saturating_add(2048))];
    let text = String::from_utf8_lossy(window);
    let mut out = redact_urls(&text);
    let mut end = out.len().min(max_bytes);
    while !out.is_char_boundary(end) {
        end -= 1;
    }
    out.truncate(end);
    Some(out)
}

/// `text` with every `http://` or `https://` URL redacted by [`redact_url`].
fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = find_url(rest) {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let len = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`'))
            .unwrap_or(tail.len());
        out.push_str(&redact_url(&tail[..len]));
        rest = &tail[len..];
    }
    out.push_str(rest);
    out
}

fn find_url(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    match (lower.find("http://"), lower.find("https://")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Kafka's murmur2 hash of a key, as the Java client and librdkafka's `murmur2` and
/// `murmur2_random` partitioners compute it.
pub fn murmur2(key: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = key.len();
    #[allow(clippy::cast_possible_truncation)]
    let mut h = SEED ^ (len as u32);
    let mut chunks = key.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if let Some(&first) = tail.first() {
        h ^= u32::from(first);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// The partition of `partitions` that the `murmur2_random` partitioner (the attempt log's
/// producer) puts `key` in: `(murmur2(key) & 0x7fffffff) % partitions`. `None` for no
/// partitions.
pub fn partition_for(key: &[u8], partitions: i32) -> Option<i32> {
    let n = u32::try_from(partitions).ok().filter(|n| *n > 0)?;
    i32::try_from((murmur2(key) & 0x7fff_ffff) % n).ok()
}

mod datum;
#[cfg(test)]
mod tests;
