//! The JSON form of a DLQ record (`inspect --output json`, `archive --format jsonl`): every
//! envelope field, the original payload as text when it is UTF-8 JSON and base64 otherwise,
//! keys and headers as text when UTF-8. Lossless: [`from_json`] reads it back, also lines
//! written before envelope v3 (whose payload was never cut) and v4 (without a tenant).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hookline_core::envelope::{DlqEnvelope, DlqHeader, ErrorReason};
use serde_json::{Map, Value, json};

use crate::actions::{Action, History};
use crate::filter::format_ms;
use crate::record::{DlqRecord, Header, Undecodable};
use crate::select::Selected;

/// How bytes are written in JSON.
fn bytes_fields(out: &mut Map<String, Value>, name: &str, bytes: Option<&[u8]>, json_only: bool) {
    let (value, encoding) = match bytes {
        None => (Value::Null, None),
        Some(b) => match std::str::from_utf8(b) {
            Ok(text) if !json_only || serde_json::from_str::<Value>(text).is_ok() => {
                let encoding = if json_only { "json" } else { "text" };
                (Value::String(text.to_owned()), Some(encoding))
            }
            _ => (Value::String(BASE64.encode(b)), Some("base64")),
        },
    };
    out.insert(name.to_owned(), value);
    if let Some(encoding) = encoding {
        out.insert(format!("{name}_encoding"), json!(encoding));
    }
}

fn headers_json(headers: impl Iterator<Item = (String, Option<Vec<u8>>)>) -> Value {
    Value::Array(
        headers
            .map(|(key, value)| {
                let mut h = Map::new();
                h.insert("key".into(), json!(key));
                bytes_fields(&mut h, "value", value.as_deref(), false);
                Value::Object(h)
            })
            .collect(),
    )
}

/// A selected record as one JSON object.
pub fn to_json(selected: &Selected) -> Value {
    let r = &selected.record;
    let e = &r.envelope;
    let mut o = Map::new();
    o.insert("partition".into(), json!(r.partition));
    o.insert("offset".into(), json!(r.offset));
    o.insert("timestamp".into(), json!(r.timestamp_ms.map(format_ms)));
    o.insert("timestamp_ms".into(), json!(r.timestamp_ms));
    bytes_fields(&mut o, "key", r.key.as_deref(), false);
    o.insert("status".into(), json!(selected.status().as_str()));
    o.insert("history".into(), json!(selected.history.0));
    o.insert("event_id".into(), json!(e.event_id));
    o.insert("event_type".into(), json!(e.event_type));
    o.insert("endpoint_id".into(), json!(e.endpoint_id));
    o.insert("tenant_id".into(), json!(e.tenant_id));
    o.insert("endpoint_url".into(), json!(e.endpoint_url));
    o.insert("error_reason".into(), json!(e.error_reason.code()));
    o.insert("error_message".into(), json!(e.error_message));
    o.insert("last_status_code".into(), json!(e.last_status_code));
    o.insert("attempts".into(), json!(e.attempts));
    o.insert(
        "first_attempt_at".into(),
        json!(e.first_attempt_at_ms.map(format_ms)),
    );
    o.insert("first_attempt_at_ms".into(), json!(e.first_attempt_at_ms));
    o.insert(
        "error_timestamp".into(),
        json!(format_ms(e.error_timestamp_ms)),
    );
    o.insert("error_timestamp_ms".into(), json!(e.error_timestamp_ms));
    o.insert("dispatcher_id".into(), json!(e.dispatcher_id));
    o.insert("original_topic".into(), json!(e.original_topic));
    o.insert("original_partition".into(), json!(e.original_partition));
    o.insert("original_offset".into(), json!(e.original_offset));
    bytes_fields(&mut o, "original_key", e.original_key.as_deref(), false);
    bytes_fields(
        &mut o,
        "original_payload",
        Some(&e.original_payload_bytes),
        true,
    );
    o.insert(
        "original_payload_truncated".into(),
        json!(e.original_payload_truncated),
    );
    o.insert(
        "original_payload_size".into(),
        json!(e.original_payload_size),
    );
    o.insert(
        "original_headers".into(),
        headers_json(
            e.original_headers
                .iter()
                .map(|h| (h.key.clone(), h.value.clone())),
        ),
    );
    o.insert("envelope_version".into(), json!(e.envelope_version));
    o.insert("headers".into(), headers_json(r.headers.iter().cloned()));
    Value::Object(o)
}

/// A record that could not be decoded, as one JSON object (`"undecodable": true`).
pub fn undecodable_json(u: &Undecodable) -> Value {
    let mut o = Map::new();
    o.insert("partition".into(), json!(u.partition));
    o.insert("offset".into(), json!(u.offset));
    o.insert("timestamp".into(), json!(u.timestamp_ms.map(format_ms)));
    bytes_fields(&mut o, "key", u.key.as_deref(), false);
    o.insert("undecodable".into(), json!(true));
    o.insert("error".into(), json!(u.error));
    Value::Object(o)
}

/// Reads back an object written by [`to_json`]; the error names the field.
pub fn from_json(value: Value) -> Result<Selected, String> {
    let Value::Object(o) = value else {
        return Err("not a JSON object".to_owned());
    };
    let f = Fields(&o);
    let error_reason: ErrorReason = f
        .string("error_reason")?
        .parse()
        .map_err(|e| format!("field `error_reason`: {e}"))?;
    let history: Vec<Action> = match o.get("history") {
        None | Some(Value::Null) => Vec::new(),
        Some(h) => {
            serde_json::from_value(h.clone()).map_err(|e| format!("field `history`: {e}"))?
        }
    };
    let envelope = DlqEnvelope {
        envelope_version: f.int("envelope_version")?,
        event_id: f.string("event_id")?,
        event_type: f.opt_string("event_type")?,
        endpoint_id: f.opt_string("endpoint_id")?,
        endpoint_url: f.opt_string("endpoint_url")?,
        original_topic: f.string("original_topic")?,
        original_partition: f.int("original_partition")?,
        original_offset: f.long("original_offset")?,
        original_key: f.bytes("original_key")?,
        original_payload_bytes: f
            .bytes("original_payload")?
            .ok_or("field `original_payload` is missing")?,
        original_headers: f
            .headers("original_headers")?
            .into_iter()
            .map(|(key, value)| DlqHeader { key, value })
            .collect(),
        error_reason,
        error_message: f.string("error_message")?,
        last_status_code: f
            .opt_long("last_status_code")?
            .map(u16::try_from)
            .transpose()
            .map_err(|_| "field `last_status_code` is out of range")?,
        attempts: u32::try_from(f.long("attempts")?)
            .map_err(|_| "field `attempts` is out of range")?,
        first_attempt_at_ms: f.opt_long("first_attempt_at_ms")?,
        error_timestamp_ms: f.long("error_timestamp_ms")?,
        dispatcher_id: f.string("dispatcher_id")?,
        original_payload_truncated: f.opt_bool("original_payload_truncated")?.unwrap_or(false),
        original_payload_size: f
            .opt_long("original_payload_size")?
            .map(u64::try_from)
            .transpose()
            .map_err(|_| "field `original_payload_size` is out of range")?,
        tenant_id: f.opt_string("tenant_id")?,
    };
    Ok(Selected {
        record: DlqRecord {
            partition: f.int("partition")?,
            offset: f.long("offset")?,
            timestamp_ms: f.opt_long("timestamp_ms")?,
            key: f.bytes("key")?,
            headers: f.headers("headers")?,
            envelope,
        },
        history: History(history),
    })
}

struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    fn opt_string(&self, name: &str) -> Result<Option<String>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("field `{name}` must be a string")),
        }
    }

    fn string(&self, name: &str) -> Result<String, String> {
        self.opt_string(name)?
            .ok_or_else(|| format!("field `{name}` is missing"))
    }

    fn opt_bool(&self, name: &str) -> Result<Option<bool>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(format!("field `{name}` must be a boolean")),
        }
    }

    fn opt_long(&self, name: &str) -> Result<Option<i64>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| format!("field `{name}` must be an integer")),
        }
    }

    fn long(&self, name: &str) -> Result<i64, String> {
        self.opt_long(name)?
            .ok_or_else(|| format!("field `{name}` is missing"))
    }

    fn int(&self, name: &str) -> Result<i32, String> {
        i32::try_from(self.long(name)?).map_err(|_| format!("field `{name}` is out of range"))
    }

    fn bytes(&self, name: &str) -> Result<Option<Vec<u8>>, String> {
        let Some(text) = self.opt_string(name)? else {
            return Ok(None);
        };
        let encoding = self.opt_string(&format!("{name}_encoding"))?;
        match encoding.as_deref() {
            Some("base64") => BASE64
                .decode(text)
                .map(Some)
                .map_err(|e| format!("field `{name}` is not base64: {e}")),
            Some("text" | "json") | None => Ok(Some(text.into_bytes())),
            Some(other) => Err(format!("field `{name}_encoding` is `{other}`")),
        }
    }

    fn headers(&self, name: &str) -> Result<Vec<Header>, String> {
        let Some(items) = self.get(name) else {
            return Ok(Vec::new());
        };
        let Value::Array(items) = items else {
            return Err(format!("field `{name}` must be an array"));
        };
        items
            .iter()
            .map(|item| {
                let Value::Object(h) = item else {
                    return Err(format!("field `{name}` must hold objects"));
                };
                let h = Fields(h);
                Ok((h.string("key")?, h.bytes("value")?))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use hookline_core::envelope::ErrorReason;

    use super::*;
    use crate::actions::ActionKind;
    use crate::record::fixtures::record;

    #[test]
    fn json_payloads_are_text_and_others_base64_and_all_round_trips() {
        let mut selected = Selected {
            record: record(
                1,
                9,
                "ep-a",
                ErrorReason::RetriesExhausted,
                1_714_564_800_000,
            ),
            history: History(vec![Action::new(ActionKind::Note, 1, "ops")]),
        };
        let view = to_json(&selected);
        assert_eq!(view["original_payload"], r#"{"event_id":"x","n":1}"#);
        assert_eq!(view["original_payload_encoding"], "json");
        assert_eq!(view["original_key"], "ep-a");
        assert_eq!(view["error_reason"], "retries_exhausted");
        assert_eq!(view["error_timestamp"], "2024-05-01T12:00:00.000Z");
        assert_eq!(view["status"], "open");
        assert_eq!(view["original_payload_truncated"], false);
        assert!(view["original_payload_size"].is_null());
        assert_eq!(from_json(view).expect("reads back"), selected);

        selected.record.envelope.original_payload_bytes = vec![0, 0, 0, 0, 7, 2, 0xff];
        selected.record.envelope.original_key = Some(vec![0xfe, 0x01]);
        selected.record.envelope.original_headers[0].value = None;
        let view = to_json(&selected);
        assert_eq!(view["original_payload_encoding"], "base64");
        assert_eq!(
            view["original_payload"],
            BASE64.encode([0, 0, 0, 0, 7, 2, 0xff])
        );
        assert_eq!(view["original_key_encoding"], "base64");
        assert!(view["original_headers"][0]["value"].is_null());
        assert_eq!(from_json(view).expect("reads back"), selected);

        // UTF-8 that is not JSON is not shown as JSON text.
        selected.record.envelope.original_payload_bytes = b"plain words".to_vec();
        let view = to_json(&selected);
        assert_eq!(view["original_payload_encoding"], "base64");
        assert_eq!(from_json(view).expect("reads back"), selected);
    }

    #[test]
    fn a_cut_payload_is_shown_with_its_full_size_and_read_back() {
        let mut selected = Selected {
            record: record(0, 3, "ep-a", ErrorReason::RetriesExhausted, 5),
            history: History::default(),
        };
        let e = &mut selected.record.envelope;
        e.original_payload_bytes = br#"{"event_id":"x","n":"#.to_vec();
        e.original_payload_truncated = true;
        e.original_payload_size = Some(1_500_000);
        let view = to_json(&selected);
        assert_eq!(view["original_payload_truncated"], true);
        assert_eq!(view["original_payload_size"], 1_500_000);
        assert_eq!(
            view["original_payload_encoding"], "base64",
            "a cut JSON payload is no longer JSON"
        );
        assert_eq!(from_json(view).expect("reads back"), selected);
    }

    #[test]
    fn the_tenant_is_shown_and_read_back() {
        let mut selected = Selected {
            record: record(0, 3, "ep-a", ErrorReason::RetriesExhausted, 5),
            history: History::default(),
        };
        let view = to_json(&selected);
        assert!(view["tenant_id"].is_null(), "a direct delivery: {view}");
        assert_eq!(from_json(view).expect("reads back"), selected);

        selected.record.envelope.tenant_id = Some("acme".into());
        let view = to_json(&selected);
        assert_eq!(view["tenant_id"], "acme");
        assert_eq!(from_json(view.clone()).expect("reads back"), selected);

        // A line archived before envelope v4 has no tenant.
        let mut old = view;
        old.as_object_mut().expect("an object").remove("tenant_id");
        let read = from_json(old).expect("reads back");
        assert_eq!(read.record.envelope.tenant_id, None);
        let mut bad = to_json(&selected);
        bad["tenant_id"] = json!(7);
        assert_eq!(
            from_json(bad).expect_err("bad"),
            "field `tenant_id` must be a string"
        );
    }

    /// A line archived before envelope v3 has neither field: not truncated.
    #[test]
    fn lines_without_the_v3_fields_read_as_not_truncated() {
        let selected = Selected {
            record: record(0, 3, "ep-a", ErrorReason::RetriesExhausted, 5),
            history: History::default(),
        };
        let mut view = to_json(&selected);
        let fields = view.as_object_mut().expect("an object");
        fields.remove("original_payload_truncated");
        fields.remove("original_payload_size");
        assert_eq!(from_json(view).expect("reads back"), selected);
        let mut view = to_json(&selected);
        view["original_payload_size"] = json!(-1);
        assert_eq!(
            from_json(view).expect_err("bad"),
            "field `original_payload_size` is out of range"
        );
    }

    #[test]
    fn unreadable_objects_name_the_field() {
        let selected = Selected {
            record: record(0, 0, "a", ErrorReason::BlockedUrl, 5),
            history: History::default(),
        };
        let mut view = to_json(&selected);
        view["attempts"] = json!("three");
        assert_eq!(
            from_json(view).expect_err("bad"),
            "field `attempts` must be an integer"
        );
        assert!(from_json(json!([1])).is_err());
    }
}

/// Outside input never panics the JSON reader (a line of an archive): any JSON value, any
/// line of text, and records as written with fields removed or given values of any shape. A
/// record read back is shown as a table row and survives its own JSON form.
#[cfg(test)]
mod fuzz {
    use hookline_core::envelope::ErrorReason;
    use proptest::prelude::*;

    use super::*;
    use crate::actions::ActionKind;
    use crate::fuzz::{config, edited_object, json_value};
    use crate::record::fixtures::record;
    use crate::view::table_row;

    fn written() -> Value {
        let mut selected = Selected {
            record: record(
                1,
                9,
                "ep-a",
                ErrorReason::RetriesExhausted,
                1_714_564_800_000,
            ),
            history: History(vec![Action::new(ActionKind::Redriven, 1, "ops")]),
        };
        selected.record.envelope.original_key = Some(vec![0xfe, 0x01]);
        to_json(&selected)
    }

    fn check(value: Value) -> Result<(), TestCaseError> {
        if let Ok(selected) = from_json(value) {
            let _ = table_row(&selected);
            prop_assert_eq!(from_json(to_json(&selected)), Ok(selected));
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(config(512))]

        #[test]
        fn any_json_value(value in json_value()) {
            check(value)?;
        }

        #[test]
        fn any_line_of_text(line in prop_oneof![any::<String>(), "[{}\\[\\]\":,a-z0-9 ]{0,64}"]) {
            if let Ok(value) = serde_json::from_str::<Value>(&line) {
                check(value)?;
            }
        }

        #[test]
        fn written_records_with_edited_fields(value in edited_object(written())) {
            check(value)?;
        }
    }
}
