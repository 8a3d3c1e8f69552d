//! The JSON form of a DLQ record (`inspect --output json`, `archive --format jsonl`): every
//! envelope field, the original payload as text when it is UTF-8 JSON and base64 otherwise,
//! keys and headers as text when UTF-8. Lossless: [`from_json`] reads it back, also lines
//! written before envelope v3 (whose payload was never cut) and v4 (without a tenant).
//!
//! The shape is `RecordJson`, derived with serde; reading goes through
//! `serde_path_to_error`, so a bad field's error names its path (`original_headers[1].key`).
//! A line is written through a `serde_json::Value`, whose keys come out sorted, as they
//! always have for the users' `jq` and the archives already written. Reading ignores fields
//! it does not know (`inspect` adds `original_event`) and the fields written only for people
//! (`timestamp`, `status`...), and takes a null as an absent value.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hookline_core::envelope::{DlqEnvelope, DlqHeader, ErrorReason};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::actions::{Action, History};
use crate::filter::format_ms;
use crate::record::{DlqRecord, Header, Undecodable};
use crate::select::Selected;

/// A JSON value that is not a DLQ record as [`to_json`] writes it.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// Not a JSON object.
    #[error("not a JSON object")]
    NotAnObject,
    /// The record as a whole: a required field is missing.
    #[error(transparent)]
    Record(serde_json::Error),
    /// A field is of the wrong type or out of range.
    #[error("field `{path}`: {source}")]
    Field {
        /// Its path, e.g. `attempts` or `original_headers[1].key`.
        path: String,
        /// What serde found wrong.
        #[source]
        source: serde_json::Error,
    },
    /// A field whose `_encoding` says base64 is not base64.
    #[error("field `{path}` is not base64: {source}")]
    Base64 {
        /// Its path, e.g. `original_payload` or `headers[0].value`.
        path: String,
        /// The decoder's error.
        #[source]
        source: base64::DecodeError,
    },
}

impl From<serde_path_to_error::Error<serde_json::Error>> for JsonError {
    fn from(error: serde_path_to_error::Error<serde_json::Error>) -> JsonError {
        if error.path().iter().next().is_none() {
            return JsonError::Record(error.into_inner());
        }
        JsonError::Field {
            path: error.path().to_string(),
            source: error.into_inner(),
        }
    }
}

/// How a field of bytes is written (in `<field>_encoding`). A line without it is text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Encoding {
    /// UTF-8, as it is.
    Text,
    /// UTF-8 that is JSON, as it is (payloads only).
    Json,
    /// Anything else, base64 with padding.
    Base64,
}

/// `bytes` as JSON text: as text when UTF-8 (for a payload, only when also JSON), else
/// base64.
fn encode(bytes: &[u8], payload: bool) -> (String, Encoding) {
    match std::str::from_utf8(bytes) {
        Ok(text) if !payload => (text.to_owned(), Encoding::Text),
        Ok(text) if serde_json::from_str::<Value>(text).is_ok() => {
            (text.to_owned(), Encoding::Json)
        }
        _ => (BASE64.encode(bytes), Encoding::Base64),
    }
}

/// [`encode`] of bytes that may be absent (null, and no `_encoding` field).
fn encode_opt(bytes: Option<&[u8]>) -> (Option<String>, Option<Encoding>) {
    match bytes.map(|b| encode(b, false)) {
        Some((text, encoding)) => (Some(text), Some(encoding)),
        None => (None, None),
    }
}

fn decode(path: &str, text: String, encoding: Option<Encoding>) -> Result<Vec<u8>, JsonError> {
    match encoding {
        Some(Encoding::Base64) => BASE64.decode(text).map_err(|source| JsonError::Base64 {
            path: path.to_owned(),
            source,
        }),
        Some(Encoding::Text | Encoding::Json) | None => Ok(text.into_bytes()),
    }
}

fn decode_opt(
    path: &str,
    text: Option<String>,
    encoding: Option<Encoding>,
) -> Result<Option<Vec<u8>>, JsonError> {
    text.map(|text| decode(path, text, encoding)).transpose()
}

/// One header, of the record or of the original.
#[derive(Debug, Serialize, Deserialize)]
struct HeaderJson {
    key: String,
    value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_encoding: Option<Encoding>,
}

impl HeaderJson {
    fn new(key: &str, value: Option<&[u8]>) -> HeaderJson {
        let (value, value_encoding) = encode_opt(value);
        HeaderJson {
            key: key.to_owned(),
            value,
            value_encoding,
        }
    }

    fn read_all(list: &str, headers: Option<Vec<HeaderJson>>) -> Result<Vec<Header>, JsonError> {
        headers
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, h)| {
                let path = format!("{list}[{i}].value");
                Ok((h.key, decode_opt(&path, h.value, h.value_encoding)?))
            })
            .collect()
    }
}

/// The error reason as its code (`retries_exhausted`); read back from a code or an Avro
/// symbol.
mod reason_code {
    use hookline_core::envelope::ErrorReason;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(reason: &ErrorReason, out: S) -> Result<S::Ok, S::Error> {
        out.serialize_str(reason.code())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(input: D) -> Result<ErrorReason, D::Error> {
        String::deserialize(input)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// A DLQ record as one JSON object. Fields marked "for people" are written and not read;
/// every `Option` may be absent or null.
#[derive(Debug, Serialize, Deserialize)]
struct RecordJson {
    partition: i32,
    offset: i64,
    /// For people: `timestamp_ms` in RFC 3339.
    #[serde(skip_deserializing)]
    timestamp: Option<String>,
    timestamp_ms: Option<i64>,
    key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_encoding: Option<Encoding>,
    /// For people: from `history`.
    #[serde(skip_deserializing)]
    status: &'static str,
    history: Option<Vec<Action>>,
    event_id: String,
    event_type: Option<String>,
    endpoint_id: Option<String>,
    /// Absent before envelope v4.
    tenant_id: Option<String>,
    endpoint_url: Option<String>,
    #[serde(with = "reason_code")]
    error_reason: ErrorReason,
    error_message: String,
    last_status_code: Option<u16>,
    attempts: u32,
    /// For people: `first_attempt_at_ms` in RFC 3339.
    #[serde(skip_deserializing)]
    first_attempt_at: Option<String>,
    first_attempt_at_ms: Option<i64>,
    /// For people: `error_timestamp_ms` in RFC 3339.
    #[serde(skip_deserializing)]
    error_timestamp: String,
    error_timestamp_ms: i64,
    dispatcher_id: String,
    original_topic: String,
    original_partition: i32,
    original_offset: i64,
    original_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    original_key_encoding: Option<Encoding>,
    original_payload: String,
    original_payload_encoding: Option<Encoding>,
    /// Absent before envelope v3: not truncated.
    original_payload_truncated: Option<bool>,
    /// Absent before envelope v3.
    original_payload_size: Option<u64>,
    original_headers: Option<Vec<HeaderJson>>,
    envelope_version: i32,
    headers: Option<Vec<HeaderJson>>,
}

impl From<&Selected> for RecordJson {
    fn from(selected: &Selected) -> RecordJson {
        let r = &selected.record;
        let e = &r.envelope;
        let (key, key_encoding) = encode_opt(r.key.as_deref());
        let (original_key, original_key_encoding) = encode_opt(e.original_key.as_deref());
        let (original_payload, payload_encoding) = encode(&e.original_payload_bytes, true);
        RecordJson {
            partition: r.partition,
            offset: r.offset,
            timestamp: r.timestamp_ms.map(format_ms),
            timestamp_ms: r.timestamp_ms,
            key,
            key_encoding,
            status: selected.status().as_str(),
            history: Some(selected.history.0.clone()),
            event_id: e.event_id.clone(),
            event_type: e.event_type.clone(),
            endpoint_id: e.endpoint_id.clone(),
            tenant_id: e.tenant_id.clone(),
            endpoint_url: e.endpoint_url.clone(),
            error_reason: e.error_reason,
            error_message: e.error_message.clone(),
            last_status_code: e.last_status_code,
            attempts: e.attempts,
            first_attempt_at: e.first_attempt_at_ms.map(format_ms),
            first_attempt_at_ms: e.first_attempt_at_ms,
            error_timestamp: format_ms(e.error_timestamp_ms),
            error_timestamp_ms: e.error_timestamp_ms,
            dispatcher_id: e.dispatcher_id.clone(),
            original_topic: e.original_topic.clone(),
            original_partition: e.original_partition,
            original_offset: e.original_offset,
            original_key,
            original_key_encoding,
            original_payload,
            original_payload_encoding: Some(payload_encoding),
            original_payload_truncated: Some(e.original_payload_truncated),
            original_payload_size: e.original_payload_size,
            original_headers: Some(
                e.original_headers
                    .iter()
                    .map(|h| HeaderJson::new(&h.key, h.value.as_deref()))
                    .collect(),
            ),
            envelope_version: e.envelope_version,
            headers: Some(
                r.headers
                    .iter()
                    .map(|(key, value)| HeaderJson::new(key, value.as_deref()))
                    .collect(),
            ),
        }
    }
}

impl RecordJson {
    fn into_selected(self) -> Result<Selected, JsonError> {
        let envelope = DlqEnvelope {
            envelope_version: self.envelope_version,
            event_id: self.event_id,
            event_type: self.event_type,
            endpoint_id: self.endpoint_id,
            endpoint_url: self.endpoint_url,
            original_topic: self.original_topic,
            original_partition: self.original_partition,
            original_offset: self.original_offset,
            original_key: decode_opt(
                "original_key",
                self.original_key,
                self.original_key_encoding,
            )?,
            original_payload_bytes: decode(
                "original_payload",
                self.original_payload,
                self.original_payload_encoding,
            )?,
            original_headers: HeaderJson::read_all("original_headers", self.original_headers)?
                .into_iter()
                .map(|(key, value)| DlqHeader { key, value })
                .collect(),
            error_reason: self.error_reason,
            error_message: self.error_message,
            last_status_code: self.last_status_code,
            attempts: self.attempts,
            first_attempt_at_ms: self.first_attempt_at_ms,
            error_timestamp_ms: self.error_timestamp_ms,
            dispatcher_id: self.dispatcher_id,
            original_payload_truncated: self.original_payload_truncated.unwrap_or(false),
            original_payload_size: self.original_payload_size,
            tenant_id: self.tenant_id,
        };
        Ok(Selected {
            record: DlqRecord {
                partition: self.partition,
                offset: self.offset,
                timestamp_ms: self.timestamp_ms,
                key: decode_opt("key", self.key, self.key_encoding)?,
                headers: HeaderJson::read_all("headers", self.headers)?,
                envelope,
            },
            history: History(self.history.unwrap_or_default()),
        })
    }
}

/// A record that could not be decoded, as written (never read back).
#[derive(Serialize)]
struct UndecodableJson<'a> {
    partition: i32,
    offset: i64,
    timestamp: Option<String>,
    key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_encoding: Option<Encoding>,
    undecodable: bool,
    error: &'a str,
}

/// `value` as a JSON value: its keys sorted, as [`to_json`] has always written them.
fn to_value(value: impl Serialize) -> Value {
    // Cannot fail: these types have string keys and no fallible `Serialize`.
    serde_json::to_value(value).expect("a DLQ record's JSON form is a JSON value")
}

/// A selected record as one JSON object.
pub fn to_json(selected: &Selected) -> Value {
    to_value(RecordJson::from(selected))
}

/// A record that could not be decoded, as one JSON object (`"undecodable": true`).
pub fn undecodable_json(u: &Undecodable) -> Value {
    let (key, key_encoding) = encode_opt(u.key.as_deref());
    to_value(UndecodableJson {
        partition: u.partition,
        offset: u.offset,
        timestamp: u.timestamp_ms.map(format_ms),
        key,
        key_encoding,
        undecodable: true,
        error: &u.error,
    })
}

/// Reads back an object written by [`to_json`]; the error names the field.
pub fn from_json(value: Value) -> Result<Selected, JsonError> {
    if !value.is_object() {
        return Err(JsonError::NotAnObject);
    }
    serde_path_to_error::deserialize::<_, RecordJson>(value)?.into_selected()
}

#[cfg(test)]
mod tests;
