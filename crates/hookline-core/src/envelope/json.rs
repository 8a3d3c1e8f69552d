//! A readable JSON view of an envelope, for people and for `jq`: payloads and keys as text
//! when they are UTF-8 (and the payload as JSON when it is JSON), else base64.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value, json};

use super::DlqEnvelope;

/// Bytes as a JSON value: the parsed JSON when they are JSON, the text when they are UTF-8,
/// else `{"base64": "..."}`.
pub fn bytes_view(bytes: &[u8]) -> Value {
    if let Ok(parsed) = serde_json::from_slice::<Value>(bytes) {
        return parsed;
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Value::String(text.to_owned()),
        Err(_) => json!({ "base64": BASE64.encode(bytes) }),
    }
}

impl DlqEnvelope {
    /// Every field as JSON (with `trace_id` from [`DlqEnvelope::trace_id`]), the reason as
    /// its symbol, bytes as [`bytes_view`].
    pub fn to_json_view(&self) -> Value {
        let headers: Vec<Value> = self
            .original_headers
            .iter()
            .map(|h| {
                let value = h.value.as_deref().map(|v| match std::str::from_utf8(v) {
                    Ok(text) => Value::String(text.to_owned()),
                    Err(_) => json!({ "base64": BASE64.encode(v) }),
                });
                json!({ "key": h.key, "value": value })
            })
            .collect();
        let mut view = Map::new();
        view.insert("envelope_version".into(), json!(self.envelope_version));
        view.insert("event_id".into(), json!(self.event_id));
        view.insert("event_type".into(), json!(self.event_type));
        view.insert("endpoint_id".into(), json!(self.endpoint_id));
        view.insert("endpoint_url".into(), json!(self.endpoint_url));
        view.insert("error_reason".into(), json!(self.error_reason.symbol()));
        view.insert("error_message".into(), json!(self.error_message));
        view.insert("last_status_code".into(), json!(self.last_status_code));
        view.insert("attempts".into(), json!(self.attempts));
        view.insert(
            "first_attempt_at_ms".into(),
            json!(self.first_attempt_at_ms),
        );
        view.insert("error_timestamp_ms".into(), json!(self.error_timestamp_ms));
        view.insert("dispatcher_id".into(), json!(self.dispatcher_id));
        view.insert("trace_id".into(), json!(self.trace_id()));
        view.insert("original_topic".into(), json!(self.original_topic));
        view.insert("original_partition".into(), json!(self.original_partition));
        view.insert("original_offset".into(), json!(self.original_offset));
        view.insert(
            "original_key".into(),
            self.original_key.as_deref().map_or(Value::Null, bytes_view),
        );
        view.insert("original_headers".into(), Value::Array(headers));
        view.insert(
            "original_payload".into(),
            bytes_view(&self.original_payload_bytes),
        );
        Value::Object(view)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_text_and_binary_bytes_are_shown_readably() {
        assert_eq!(bytes_view(br#"{"a":1}"#), json!({ "a": 1 }));
        assert_eq!(bytes_view(b"plain text"), json!("plain text"));
        assert_eq!(bytes_view(&[0xff, 0x00]), json!({ "base64": "/wA=" }));
    }
}
