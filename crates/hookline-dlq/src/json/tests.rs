use hookline_core::envelope::ErrorReason;
use serde_json::json;

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
        from_json(bad).expect_err("bad").to_string(),
        "field `tenant_id`: invalid type: integer `7`, expected a string"
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
        from_json(view).expect_err("bad").to_string(),
        "field `original_payload_size`: invalid value: integer `-1`, expected u64"
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
        from_json(view).expect_err("bad").to_string(),
        "field `attempts`: invalid type: string \"three\", expected u32"
    );
    assert!(matches!(from_json(json!([1])), Err(JsonError::NotAnObject)));
}

/// Lines as users' `jq` scripts and archives have them, byte for byte: keys sorted, bytes as
/// text, JSON or base64, control characters as `\uXXXX`, nulls written out.
#[test]
fn lines_are_written_byte_for_byte_as_before() {
    let mut s = Selected {
        record: record(
            1,
            9,
            "ep-a",
            ErrorReason::RetriesExhausted,
            1_714_564_800_000,
        ),
        history: History(vec![Action {
            note: Some("n\u{1b}[31m".into()),
            ..Action::new(ActionKind::Redriven, 1, "ops")
        }]),
    };
    assert_eq!(
        to_json(&s).to_string(),
        concat!(
            r#"{"attempts":3,"dispatcher_id":"d-1","endpoint_id":"ep-a","#,
            r#""endpoint_url":"https://example.com/hook","envelope_version":5,"#,
            r#""error_message":"HTTP 503","error_reason":"retries_exhausted","#,
            r#""error_timestamp":"2024-05-01T12:00:00.000Z","error_timestamp_ms":1714564800000,"#,
            r#""event_id":"evt-ep-a-1714564800000","event_type":"invoice.paid","#,
            r#""first_attempt_at":"2024-05-01T11:59:59.000Z","first_attempt_at_ms":1714564799000,"#,
            r#""headers":[{"key":"webhook-id","value":"x","value_encoding":"text"},"#,
            r#"{"key":"hookline-attempt","value":"3","value_encoding":"text"}],"#,
            r#""history":[{"action":"redriven","at":"1970-01-01T00:00:00.001Z","by":"ops","#,
            r#""note":"n\u001b[31m"}],"key":"ep-a","key_encoding":"text","#,
            r#""last_status_code":503,"#,
            r#""offset":9,"#,
            r#""original_headers":[{"key":"webhook-id","value":"x","value_encoding":"text"}],"#,
            r#""original_key":"ep-a","original_key_encoding":"text","original_offset":7,"#,
            r#""original_partition":0,"original_payload":"{\"event_id\":\"x\",\"n\":1}","#,
            r#""original_payload_encoding":"json","original_payload_size":null,"#,
            r#""original_payload_truncated":false,"original_topic":"webhook-events","#,
            r#""partition":1,"#,
            r#""status":"redriven","tenant_id":null,"timestamp":"2024-05-01T12:00:00.005Z","#,
            r#""timestamp_ms":1714564800005}"#,
        )
    );

    let r = &mut s.record;
    r.envelope.original_payload_bytes = vec![0, 0, 0, 0, 7, 2, 0xff];
    r.envelope.original_key = None;
    r.key = Some(vec![0xfe, 0x01]);
    r.timestamp_ms = None;
    r.envelope.original_headers[0].value = None;
    r.headers[1].1 = Some(b"a\tb\x1b".to_vec());
    r.envelope.original_payload_truncated = true;
    r.envelope.original_payload_size = Some(1_500_000);
    r.envelope.tenant_id = Some("acme".into());
    r.envelope.last_status_code = None;
    r.envelope.first_attempt_at_ms = None;
    s.history = History::default();
    assert_eq!(
        to_json(&s).to_string(),
        concat!(
            r#"{"attempts":3,"dispatcher_id":"d-1","endpoint_id":"ep-a","#,
            r#""endpoint_url":"https://example.com/hook","envelope_version":5,"#,
            r#""error_message":"HTTP 503","error_reason":"retries_exhausted","#,
            r#""error_timestamp":"2024-05-01T12:00:00.000Z","error_timestamp_ms":1714564800000,"#,
            r#""event_id":"evt-ep-a-1714564800000","event_type":"invoice.paid","#,
            r#""first_attempt_at":null,"first_attempt_at_ms":null,"#,
            r#""headers":[{"key":"webhook-id","value":"x","value_encoding":"text"},"#,
            r#"{"key":"hookline-attempt","value":"a\tb\u001b","value_encoding":"text"}],"#,
            r#""history":[],"key":"/gE=","key_encoding":"base64","last_status_code":null,"#,
            r#""offset":9,"original_headers":[{"key":"webhook-id","value":null}],"#,
            r#""original_key":null,"original_offset":7,"original_partition":0,"#,
            r#""original_payload":"AAAAAAcC/w==","original_payload_encoding":"base64","#,
            r#""original_payload_size":1500000,"original_payload_truncated":true,"#,
            r#""original_topic":"webhook-events","partition":1,"status":"open","#,
            r#""tenant_id":"acme","timestamp":null,"timestamp_ms":null}"#,
        )
    );

    let mut u = Undecodable {
        partition: 2,
        offset: 5,
        timestamp_ms: Some(1_714_564_800_000),
        key: Some(vec![0xff]),
        error: "bad\u{1b}".into(),
    };
    assert_eq!(
        undecodable_json(&u).to_string(),
        concat!(
            r#"{"error":"bad\u001b","key":"/w==","key_encoding":"base64","offset":5,"#,
            r#""partition":2,"timestamp":"2024-05-01T12:00:00.000Z","undecodable":true}"#,
        )
    );
    u.timestamp_ms = None;
    u.key = None;
    assert_eq!(
        undecodable_json(&u).to_string(),
        concat!(
            r#"{"error":"bad\u001b","key":null,"offset":5,"partition":2,"timestamp":null,"#,
            r#""undecodable":true}"#,
        )
    );
}

/// A line as an early archive holds it: no v3 or v4 fields, no history, no headers, no
/// encodings, no fields for people; and a line of `inspect` with `original_event` added.
#[test]
fn old_and_annotated_lines_still_read() {
    let old = json!({
        "partition": 0, "offset": 4, "key": "ep-a",
        "event_id": "e1", "original_topic": "webhook-events", "original_partition": 2,
        "original_offset": 11, "original_payload": "{}", "error_reason": "RETRIES_EXHAUSTED",
        "error_message": "HTTP 503", "attempts": 3, "error_timestamp_ms": 5,
        "dispatcher_id": "d-1", "envelope_version": 2,
        "event_type": null, "history": null, "original_headers": null, "timestamp_ms": null,
    });
    let read = from_json(old).expect("an early line");
    let e = &read.record.envelope;
    assert_eq!(e.error_reason, ErrorReason::RetriesExhausted);
    assert_eq!(e.original_payload_bytes, b"{}");
    assert!(!e.original_payload_truncated);
    assert_eq!(
        (e.original_payload_size, e.tenant_id.as_deref()),
        (None, None)
    );
    assert!(e.original_headers.is_empty() && read.record.headers.is_empty());
    assert_eq!(read.record.key.as_deref(), Some(&b"ep-a"[..]));
    assert_eq!(read.history, History::default());

    let selected = Selected {
        record: record(0, 3, "ep-a", ErrorReason::RetriesExhausted, 5),
        history: History::default(),
    };
    let mut shown = to_json(&selected);
    shown["original_event"] = json!({"order": 42});
    shown["status"] = json!("anything: written for people, not read");
    assert_eq!(from_json(shown).expect("reads back"), selected);
}

#[test]
fn errors_name_the_path_of_the_field() {
    let selected = Selected {
        record: record(0, 0, "a", ErrorReason::BlockedUrl, 5),
        history: History::default(),
    };
    let error = |edit: &dyn Fn(&mut Value)| {
        let mut view = to_json(&selected);
        edit(&mut view);
        from_json(view).expect_err("bad").to_string()
    };
    assert_eq!(
        error(&|v| v["original_headers"][0]["key"] = json!(1)),
        "field `original_headers[0].key`: invalid type: integer `1`, expected a string"
    );
    assert_eq!(
        error(&|v| {
            v["headers"][1]["value"] = json!("%%");
            v["headers"][1]["value_encoding"] = json!("base64");
        }),
        "field `headers[1].value` is not base64: Invalid symbol 37, offset 0."
    );
    assert_eq!(
        error(&|v| v["original_payload_encoding"] = json!("hex")),
        "field `original_payload_encoding`: unknown variant `hex`, expected one of `text`, \
         `json`, `base64`"
    );
    assert_eq!(
        error(&|v| v["error_reason"] = json!("timeout")),
        "field `error_reason`: unknown error reason `timeout`"
    );
    assert_eq!(
        error(&|v| v["last_status_code"] = json!(70_000)),
        "field `last_status_code`: invalid value: integer `70000`, expected u16"
    );
    assert_eq!(
        error(&|v| v["history"] = json!([{"action": "paused"}])),
        "field `history[0].action`: unknown variant `paused`, expected one of `redriven`, \
         `resolved`, `note`"
    );
    let missing = error(&|v| {
        v.as_object_mut().expect("an object").remove("event_id");
    });
    assert_eq!(missing, "missing field `event_id`");
    // A line about a record that could not be decoded is not a record.
    let undecodable = undecodable_json(&Undecodable {
        partition: 0,
        offset: 1,
        timestamp_ms: None,
        key: None,
        error: "bad".into(),
    });
    assert!(
        from_json(undecodable)
            .expect_err("not a record")
            .to_string()
            .starts_with("missing field"),
    );
}

/// Outside input never panics the JSON reader (a line of an archive): any JSON value, any
/// line of text, and records as written with fields removed or given values of any shape. A
/// record read back is shown as a table row and survives its own JSON form.
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
            prop_assert_eq!(from_json(to_json(&selected)).ok(), Some(selected));
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
