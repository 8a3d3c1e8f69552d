//! The JSON encoding of [`WebhookEvent`], for producers without a schema registry.
//!
//! ```json
//! {"event_id": "evt_1", "event_type": "invoice.paid", "endpoint_id": "ep_1",
//!  "endpoint_url": "https://...", "payload": {"any": "JSON"}, "content_type": "application/json",
//!  "headers": {"X-Tenant": "acme"}, "created_at_ms": 1700000000000}
//! ```
//! or, for a tenant event fanned out to the tenant's subscribed endpoints,
//! ```json
//! {"event_id": "evt_2", "event_type": "invoice.paid", "tenant_id": "acme",
//!  "channels": ["eu"], "payload": {"any": "JSON"}}
//! ```
//! `payload` is any JSON value, delivered as its compact serialization (key order kept);
//! a non-JSON body goes in `payload_base64` instead. `endpoint_id` or `tenant_id` (or
//! both), and `endpoint_url`, `content_type` (default `application/json`), `headers`,
//! `channels`, `created_at_ms` (default: the time of decoding) and `expires_at_ms` (the
//! deadline, epoch milliseconds; default none) are optional. Unknown
//! fields are refused, so a misspelt field is noticed. Version 1 JSON (no tenant) reads.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use super::{DEFAULT_CONTENT_TYPE, EventError, WebhookEvent};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonEventIn<'a> {
    event_id: String,
    event_type: String,
    #[serde(default)]
    endpoint_id: Option<String>,
    #[serde(default)]
    tenant_id: Option<String>,
    #[serde(default)]
    channels: Option<Vec<String>>,
    #[serde(default)]
    endpoint_url: Option<String>,
    #[serde(default, borrow, deserialize_with = "raw_some")]
    payload: Option<&'a RawValue>,
    #[serde(default)]
    payload_base64: Option<String>,
    #[serde(default)]
    content_type: Option<String>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    created_at_ms: Option<i64>,
    #[serde(default)]
    expires_at_ms: Option<i64>,
}

/// Keeps a JSON `null` payload as the value `null` rather than as "absent".
fn raw_some<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Serialize)]
struct JsonEventOut<'a> {
    event_id: &'a str,
    event_type: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoint_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tenant_id: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    channels: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoint_url: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_base64: Option<String>,
    content_type: &'a str,
    headers: &'a BTreeMap<String, String>,
    created_at_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at_ms: Option<i64>,
}

impl WebhookEvent {
    /// Decodes the JSON form; a missing `created_at_ms` becomes the current time.
    /// Does not [`validate`](Self::validate).
    pub fn from_json(bytes: &[u8]) -> Result<Self, EventError> {
        Self::from_json_at(bytes, now_ms())
    }

    /// Decodes the JSON form; a missing `created_at_ms` becomes `default_created_at_ms`.
    pub fn from_json_at(bytes: &[u8], default_created_at_ms: i64) -> Result<Self, EventError> {
        let json: JsonEventIn<'_> = serde_json::from_slice(bytes).map_err(EventError::Json)?;
        let payload = match (json.payload, json.payload_base64) {
            (Some(_), Some(_)) => return Err(EventError::PayloadConflict),
            (Some(raw), None) => compact_json(raw.get()),
            (None, Some(b64)) => BASE64.decode(b64.as_bytes()).map_err(EventError::Base64)?,
            (None, None) => return Err(EventError::MissingField { field: "payload" }),
        };
        Ok(WebhookEvent {
            event_id: json.event_id,
            event_type: json.event_type,
            endpoint_id: json.endpoint_id,
            tenant_id: json.tenant_id,
            channels: json.channels.unwrap_or_default(),
            endpoint_url: json.endpoint_url,
            payload,
            content_type: json
                .content_type
                .unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_owned()),
            headers: json.headers.unwrap_or_default(),
            created_at_ms: json.created_at_ms.unwrap_or(default_created_at_ms),
            expires_at_ms: json.expires_at_ms,
        })
    }

    /// Encodes the JSON form. The payload goes in `payload` when the content type is JSON
    /// and the payload is compact JSON (so decoding gives back the same bytes), otherwise
    /// in `payload_base64`.
    pub fn to_json(&self) -> Vec<u8> {
        let raw = inline_payload(&self.content_type, &self.payload);
        let out = JsonEventOut {
            event_id: &self.event_id,
            event_type: &self.event_type,
            endpoint_id: self.endpoint_id.as_deref(),
            tenant_id: self.tenant_id.as_deref(),
            channels: &self.channels,
            endpoint_url: self.endpoint_url.as_deref(),
            payload: raw,
            payload_base64: raw.is_none().then(|| BASE64.encode(&self.payload)),
            content_type: &self.content_type,
            headers: &self.headers,
            created_at_ms: self.created_at_ms,
            expires_at_ms: self.expires_at_ms,
        };
        serde_json::to_vec(&out)
            .expect("a struct of strings, numbers and raw JSON always serializes")
    }
}

/// The payload as raw JSON when it can be inlined without changing its bytes.
fn inline_payload<'a>(content_type: &str, payload: &'a [u8]) -> Option<&'a RawValue> {
    if !is_json_content_type(content_type) {
        return None;
    }
    let raw: &RawValue = serde_json::from_slice(payload).ok()?;
    (compact_json(raw.get()) == payload).then_some(raw)
}

/// Whether a content type is JSON: `application/json`, `text/json` or `*/*+json`.
pub(crate) fn is_json_content_type(content_type: &str) -> bool {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    media == "application/json" || media == "text/json" || media.ends_with("+json")
}

/// Removes the insignificant whitespace of valid JSON text, keeping everything else.
/// Whitespace, quotes and backslashes are ASCII, and no byte of a multi-byte UTF-8
/// character is, so the runs copied between removed bytes are whole characters.
fn compact_json(json: &str) -> Vec<u8> {
    let bytes = json.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut run_start = 0;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => at = string_end(bytes, at + 1),
            b' ' | b'\t' | b'\n' | b'\r' => {
                out.extend_from_slice(&bytes[run_start..at]);
                at += 1;
                run_start = at;
            }
            _ => at += 1,
        }
    }
    out.extend_from_slice(&bytes[run_start..]);
    out
}

/// Where the string whose text starts at `from` ends: just past its closing quote (the
/// first one not escaped), or the end of `bytes`. Strings are most of a payload's bytes:
/// they are searched a vector at a time, not walked a byte at a time.
fn string_end(bytes: &[u8], from: usize) -> usize {
    let mut at = from;
    while let Some(found) = bytes
        .get(at..)
        .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
    {
        let hit = at + found;
        if bytes[hit] == b'"' {
            return hit + 1;
        }
        // A backslash escapes the byte after it, whatever it is.
        at = hit + 2;
    }
    bytes.len()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::tests::sample;

    #[test]
    fn full_json_decodes_and_compacts_payload_keeping_key_order() {
        let json = br#"{
            "event_id": "evt_1", "event_type": "t", "endpoint_id": "ep",
            "endpoint_url": "https://example.com/h",
            "payload": { "z": 1, "a": [1, 2, {"s": "a b\" c"}] },
            "content_type": "application/vnd.x+json",
            "headers": {"X-A": "1"},
            "created_at_ms": 17
        }"#;
        let e = WebhookEvent::from_json(json).expect("decode");
        assert_eq!(e.payload, br#"{"z":1,"a":[1,2,{"s":"a b\" c"}]}"#);
        assert_eq!(e.endpoint_url.as_deref(), Some("https://example.com/h"));
        assert_eq!(e.content_type, "application/vnd.x+json");
        assert_eq!(e.headers.get("X-A").map(String::as_str), Some("1"));
        assert_eq!(e.created_at_ms, 17);
    }

    #[test]
    fn tenant_events_decode_and_round_trip() {
        let json = br#"{"event_id":"e","event_type":"invoice.paid","tenant_id":"acme",
            "channels":["eu"],"payload":{}}"#;
        let e = WebhookEvent::from_json_at(json, 1).expect("decode");
        assert_eq!(e.endpoint_id, None);
        assert_eq!(e.tenant_id.as_deref(), Some("acme"));
        assert_eq!(e.channels, ["eu"]);
        e.validate(1024).expect("a valid tenant event");
        assert_eq!(
            WebhookEvent::from_json(&e.to_json()).expect("round trip"),
            e
        );
        let direct = br#"{"event_id":"e","event_type":"t","endpoint_id":"ep","payload":1}"#;
        let out = WebhookEvent::from_json_at(direct, 1)
            .expect("v1 JSON")
            .to_json();
        let text = String::from_utf8(out).expect("UTF-8");
        assert!(
            !text.contains("tenant_id") && !text.contains("channels"),
            "{text}"
        );
    }

    #[test]
    fn minimal_json_takes_defaults() {
        let json = br#"{"event_id":"e","event_type":"t","endpoint_id":"ep","payload":null}"#;
        let e = WebhookEvent::from_json_at(json, 99).expect("decode");
        assert_eq!(e.payload, b"null");
        assert_eq!(e.content_type, DEFAULT_CONTENT_TYPE);
        assert!(e.headers.is_empty());
        assert_eq!(e.endpoint_url, None);
        assert_eq!(e.created_at_ms, 99);
        assert_eq!(e.expires_at_ms, None);
        assert!(!String::from_utf8_lossy(&e.to_json()).contains("expires_at"));
    }

    #[test]
    fn the_deadline_decodes_and_round_trips() {
        let json = br#"{"event_id":"e","event_type":"t","endpoint_id":"ep","payload":1,
            "expires_at_ms":1700000600000}"#;
        let e = WebhookEvent::from_json_at(json, 0).expect("decode");
        assert_eq!(e.expires_at_ms, Some(1_700_000_600_000));
        let back = WebhookEvent::from_json_at(&e.to_json(), 5).expect("decode");
        assert_eq!(back, e);
        let wrong = br#"{"event_id":"e","event_type":"t","endpoint_id":"ep","payload":1,
            "expires_at_ms":"soon"}"#;
        assert!(WebhookEvent::from_json_at(wrong, 0).is_err());
    }

    #[test]
    fn base64_payload() {
        let json = br#"{"event_id":"e","event_type":"t","endpoint_id":"ep",
            "payload_base64":"AAEC/w==","content_type":"application/octet-stream"}"#;
        let e = WebhookEvent::from_json_at(json, 0).expect("decode");
        assert_eq!(e.payload, [0, 1, 2, 255]);
    }

    #[test]
    fn payload_errors() {
        let both = br#"{"event_id":"e","event_type":"t","endpoint_id":"ep","payload":1,"payload_base64":"AA=="}"#;
        assert!(matches!(
            WebhookEvent::from_json(both),
            Err(EventError::PayloadConflict)
        ));
        let none = br#"{"event_id":"e","event_type":"t","endpoint_id":"ep"}"#;
        assert!(matches!(
            WebhookEvent::from_json(none),
            Err(EventError::MissingField { field: "payload" })
        ));
        let bad = br#"{"event_id":"e","event_type":"t","endpoint_id":"ep","payload_base64":"!!"}"#;
        assert!(matches!(
            WebhookEvent::from_json(bad),
            Err(EventError::Base64(_))
        ));
    }

    #[test]
    fn unknown_and_missing_fields_are_named() {
        let unknown =
            br#"{"event_id":"e","event_type":"t","endpoint_id":"ep","payload":1,"endpointid":"x"}"#;
        let err = WebhookEvent::from_json(unknown).expect_err("unknown field");
        assert!(err.to_string().contains("endpointid"), "{err}");
        let missing = br#"{"event_type":"t","endpoint_id":"ep","payload":1}"#;
        let err = WebhookEvent::from_json(missing).expect_err("missing field");
        assert!(err.to_string().contains("event_id"), "{err}");
        assert!(WebhookEvent::from_json(b"not json").is_err());
    }

    #[test]
    fn json_round_trips_inline_and_base64() {
        let inline = sample();
        let text = String::from_utf8(inline.to_json()).expect("utf-8");
        assert!(text.contains(r#""payload":{"amount":42"#), "{text}");
        assert_eq!(
            WebhookEvent::from_json(text.as_bytes()).expect("decode"),
            inline
        );

        for (content_type, payload) in [
            ("application/octet-stream", br#"{"a":1}"#.to_vec()),
            ("application/json", br#"{ "a": 1 }"#.to_vec()),
            ("application/json", vec![0xff, 0x00]),
        ] {
            let event = WebhookEvent {
                content_type: content_type.into(),
                payload,
                endpoint_url: None,
                ..sample()
            };
            let text = String::from_utf8(event.to_json()).expect("utf-8");
            assert!(text.contains("payload_base64"), "{text}");
            assert_eq!(
                WebhookEvent::from_json(text.as_bytes()).expect("decode"),
                event
            );
        }
    }

    #[test]
    fn json_content_types() {
        assert!(is_json_content_type("application/json"));
        assert!(is_json_content_type("Application/JSON; charset=utf-8"));
        assert!(is_json_content_type("application/cloudevents+json"));
        assert!(!is_json_content_type("text/plain"));
    }
}

/// Outside input never panics the JSON decoder: arbitrary bytes and JSON values, and
/// valid events with fields removed, retyped, repeated or given huge numbers, deep nesting
/// and bad base64. A decoded event validates without panicking and survives its JSON form.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;
    use crate::event::tests::sample;
    use crate::fuzz::{
        byte_edits, bytes, config, deep_json, edited_bytes, edited_object, json_value,
        object_edits, raw_json,
    };

    /// Text of JSON's special bytes (quotes, backslashes, whitespace) and any character.
    fn any_text() -> impl Strategy<Value = String> {
        let ch = prop_oneof![
            Just('"'),
            Just('\\'),
            Just(' '),
            Just('\n'),
            Just('\t'),
            Just('\r'),
            Just('a'),
            any::<char>(),
        ];
        prop::collection::vec(ch, 0..64).prop_map(|chars| chars.into_iter().collect())
    }

    /// The reference: whitespace outside strings removed, a byte at a time.
    fn compact_byte_by_byte(json: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let (mut in_string, mut escaped) = (false, false);
        for &byte in json.as_bytes() {
            if in_string {
                if escaped {
                    escaped = false;
                } else if byte == b'\\' {
                    escaped = true;
                } else if byte == b'"' {
                    in_string = false;
                }
            } else if matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
                continue;
            } else if byte == b'"' {
                in_string = true;
            }
            out.push(byte);
        }
        out
    }

    const FIELDS: &[&str] = &[
        "event_id",
        "event_type",
        "endpoint_id",
        "endpoint_url",
        "payload",
        "payload_base64",
        "content_type",
        "headers",
        "created_at_ms",
    ];

    /// A valid event, field by field as raw JSON.
    fn valid_fields(payload: String) -> Vec<(&'static str, String)> {
        vec![
            ("event_id", r#""evt_1""#.to_owned()),
            ("event_type", r#""invoice.paid""#.to_owned()),
            ("endpoint_id", r#""ep_1""#.to_owned()),
            ("endpoint_url", r#""https://example.com/hook""#.to_owned()),
            ("payload", payload),
            ("content_type", r#""application/json""#.to_owned()),
            ("headers", r#"{"X-Tenant":"acme"}"#.to_owned()),
            ("created_at_ms", "1700000000000".to_owned()),
        ]
    }

    fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
        if let Ok(event) = WebhookEvent::from_json_at(bytes, 7) {
            let _ = event.validate(1 << 20);
            let back = WebhookEvent::from_json_at(&event.to_json(), 0);
            prop_assert_eq!(back.ok(), Some(event));
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(config(512))]

        #[test]
        fn arbitrary_bytes(bytes in bytes()) {
            check(&bytes)?;
        }

        #[test]
        fn arbitrary_json_values(value in json_value()) {
            check(value.to_string().as_bytes())?;
        }

        /// The same bytes as a walk of one byte at a time, for any text, JSON or not.
        #[test]
        fn compacting_keeps_what_a_byte_by_byte_walk_keeps(text in any_text()) {
            prop_assert_eq!(compact_json(&text), compact_byte_by_byte(&text));
        }

        /// Any text in strings (spaces, quotes, backslashes, any character) stays as it is.
        #[test]
        fn pretty_json_compacts_to_the_compact_form(value in json_value()) {
            let pretty = serde_json::to_string_pretty(&value).expect("a value serializes");
            prop_assert_eq!(compact_json(&pretty), value.to_string().into_bytes());
        }

        #[test]
        fn valid_events_with_edited_fields(
            payload in raw_json(),
            edits in object_edits(FIELDS),
        ) {
            check(edited_object(&valid_fields(payload), &edits).as_bytes())?;
        }

        #[test]
        fn valid_events_with_edited_bytes(edits in byte_edits(4)) {
            check(&edited_bytes(&sample().to_json(), &edits))?;
        }

        #[test]
        fn deeply_nested_payloads(payload in deep_json()) {
            check(edited_object(&valid_fields(payload), &[]).as_bytes())?;
        }

        #[test]
        fn payload_base64_of_any_text(
            text in prop_oneof!["[A-Za-z0-9+/=]{0,64}", "[A-Za-z0-9+/=_ -]{0,64}", any::<String>()],
        ) {
            let mut fields = valid_fields(String::new());
            fields.retain(|(name, _)| *name != "payload");
            fields.push(("payload_base64", serde_json::Value::String(text).to_string()));
            check(edited_object(&fields, &[]).as_bytes())?;
        }
    }
}
