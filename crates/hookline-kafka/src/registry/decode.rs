//! The pure half of decoding Confluent-framed Avro: the frame, the registry's answer for a
//! writer schema, the checks a writer schema must pass, and the datum. The fetch is in
//! `mod.rs` with the registry's other calls.

use std::collections::HashMap;
use std::io::Cursor;
use std::sync::{Arc, PoisonError, RwLock};

use apache_avro::Schema;
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::types::Value;
use serde::Deserialize;

use super::nesting::{self, SchemaRefusal};
use crate::{Error, Result};

/// The frame's first byte.
const MAGIC: u8 = 0;

/// A framed value's writer schema id and its Avro datum.
pub(super) fn parse_frame(bytes: &[u8]) -> Result<(u32, &[u8])> {
    match bytes {
        [MAGIC, a, b, c, d, datum @ ..] => Ok((u32::from_be_bytes([*a, *b, *c, *d]), datum)),
        _ => Err(Error::NotFramed {
            len: bytes.len(),
            first: bytes.first().copied(),
        }),
    }
}

/// `GET /schemas/ids/<id>`'s answer.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaAnswer {
    schema: String,
    /// Absent for Avro.
    #[serde(default)]
    schema_type: Option<String>,
    #[serde(default)]
    references: Vec<serde_json::Value>,
}

/// The writer schema in the registry's answer `body` for `id`, parsed and checked.
pub(super) fn writer_schema(id: u32, context: &str, body: String) -> Result<Schema> {
    let answer: SchemaAnswer = match serde_json::from_str(&body) {
        Ok(answer) => answer,
        Err(e) => {
            return Err(Error::RegistryRefused {
                context: format!("{context}: unreadable answer ({e})"),
                status: 200,
                body,
            });
        }
    };
    let refused = |reason| Error::UnsupportedSchema { id, reason };
    match answer.schema_type.as_deref() {
        None | Some("AVRO") => {}
        Some(other) => {
            return Err(refused(SchemaRefusal::NotAvro {
                schema_type: other.to_owned(),
            }));
        }
    }
    if !answer.references.is_empty() {
        return Err(refused(SchemaRefusal::References));
    }
    let schema = Schema::parse_str(&answer.schema)
        .map_err(|source| Error::UnreadableSchema { id, source })?;
    nesting::check(&schema).map_err(refused)?;
    Ok(schema)
}

/// Decodes `datum` with its writer schema (no reader schema: the value as written),
/// allocating at most [`MAX_AVRO_ALLOCATION_BYTES`](hookline_core::schema::MAX_AVRO_ALLOCATION_BYTES)
/// for any length it claims.
pub(super) fn read_datum(id: u32, writer: &Schema, datum: &[u8]) -> Result<Value> {
    hookline_core::schema::limit_avro_allocations();
    GenericDatumReader::builder(writer)
        .build()
        .and_then(|reader| reader.read_value(&mut Cursor::new(datum)))
        .map_err(|source| Error::Undecodable { id, source })
}

/// Writer schemas by id, parsed and checked. Only schemas that passed are kept: a refusal or
/// an unreachable registry is asked again next time.
#[derive(Debug, Default)]
pub(super) struct SchemaCache(RwLock<HashMap<u32, Arc<Schema>>>);

impl SchemaCache {
    pub(super) fn get(&self, id: u32) -> Option<Arc<Schema>> {
        // A panic elsewhere while the lock was held cannot leave the map half-written: an
        // insert either happened or did not.
        let map = self.0.read().unwrap_or_else(PoisonError::into_inner);
        map.get(&id).cloned()
    }

    pub(super) fn insert(&self, id: u32, schema: Arc<Schema>) {
        let mut map = self.0.write().unwrap_or_else(PoisonError::into_inner);
        map.insert(id, schema);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_magic_zero_and_a_big_endian_id() {
        assert_eq!(
            parse_frame(&[0, 0, 0, 1, 2, 9, 9]).expect("framed"),
            (258, &[9, 9][..])
        );
        assert_eq!(parse_frame(&[0, 0, 0, 0, 7]).expect("framed"), (7, &[][..]));
        for bytes in [
            &b""[..],
            &[0],
            &[0, 0, 0, 1],
            &[1, 0, 0, 0, 1, 2],
            b"{\"json\":1}",
        ] {
            let error = parse_frame(bytes).expect_err("not framed");
            assert!(matches!(error, Error::NotFramed { .. }), "{error}");
            assert!(!error.is_transient());
        }
    }

    fn answer(schema: &str, extra: &str) -> String {
        format!(r#"{{"schema":{}{extra}}}"#, serde_json::json!(schema))
    }

    const GREETING: &str = r#"{"type":"record","name":"Greeting","fields":[
        {"name":"id","type":"string"},{"name":"count","type":"long"}]}"#;

    #[test]
    fn an_avro_answer_gives_its_schema() {
        for extra in ["", r#","schemaType":"AVRO""#, r#","references":[]"#] {
            let schema = writer_schema(1, "ctx", answer(GREETING, extra)).expect("accepted");
            assert_eq!(schema, Schema::parse_str(GREETING).expect("valid"));
        }
    }

    #[test]
    fn answers_that_cannot_be_decoded_with_are_permanent() {
        let node =
            r#"{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]}]}"#;
        let cases = [
            ("not json".to_owned(), "unreadable answer"),
            (r#"{"id":1}"#.to_owned(), "unreadable answer"),
            (answer("{}", ""), "not valid Avro"),
            (answer(GREETING, r#","schemaType":"PROTOBUF""#), "PROTOBUF"),
            (
                answer(
                    GREETING,
                    r#","references":[{"name":"x","subject":"s","version":1}]"#,
                ),
                "references",
            ),
            (answer(node, ""), "recursive: Node"),
        ];
        for (body, says) in cases {
            let error = writer_schema(7, "fetching writer schema 7", body).expect_err("refused");
            assert!(!error.is_transient(), "{error}");
            assert!(error.to_string().contains(says), "{error}");
        }
    }

    #[test]
    fn data_that_does_not_match_its_schema_is_permanent() {
        let schema = Schema::parse_str(GREETING).expect("valid");
        // "evt-1" then 42, zigzag-encoded.
        let good = [&[10][..], b"evt-1", &[84]].concat();
        assert_eq!(
            read_datum(1, &schema, &good).expect("decodes"),
            Value::Record(vec![
                ("id".to_owned(), Value::String("evt-1".to_owned())),
                ("count".to_owned(), Value::Long(42)),
            ])
        );
        for bad in [&good[..3], &[][..], &[0x7f]] {
            let error = read_datum(1, &schema, bad).expect_err("undecodable");
            assert!(matches!(error, Error::Undecodable { id: 1, .. }), "{error}");
            assert!(!error.is_transient());
        }
    }

    #[test]
    fn a_value_as_deep_as_allowed_decodes() {
        // MAX_SCHEMA_DEPTH - 1 nested arrays of longs, each holding one item.
        let depth = nesting::MAX_SCHEMA_DEPTH - 1;
        let mut json = r#""long""#.to_owned();
        for _ in 0..depth {
            json = format!(r#"{{"type":"array","items":{json}}}"#);
        }
        let schema = writer_schema(3, "ctx", answer(&json, "")).expect("accepted");
        let datum = [vec![0x02; depth], vec![0x54], vec![0x00; depth]].concat();
        // On a thread with the stack of a tokio worker (2 MiB), in a debug build (where
        // apache-avro takes about 32 KiB of stack a level).
        let value = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || read_datum(3, &schema, &datum))
            .expect("thread")
            .join()
            .expect("no overflow")
            .expect("decodes");
        let mut expected = Value::Long(42);
        for _ in 0..depth {
            expected = Value::Array(vec![expected]);
        }
        assert_eq!(value, expected);
    }

    #[test]
    fn the_cache_keeps_what_it_is_given() {
        let cache = SchemaCache::default();
        assert!(cache.get(1).is_none());
        let schema = Arc::new(Schema::Long);
        cache.insert(1, Arc::clone(&schema));
        assert!(Arc::ptr_eq(&cache.get(1).expect("cached"), &schema));
        assert!(cache.get(2).is_none());
    }
}

/// Outside input never panics the pure half of decoding: arbitrary frames, registry answers
/// with arbitrary and generated writer schemas (recursive, deep, huge fixed sizes, unknown
/// references), and arbitrary datums for every schema accepted, hookline's own included
/// (then read as an event or an envelope, as the dispatcher and the DLQ tools do).
#[cfg(test)]
mod fuzz {
    use hookline_core::WebhookEvent;
    use hookline_core::envelope::DlqEnvelope;
    use hookline_core::schema::{DLQ_ENVELOPE_CURRENT, WEBHOOK_EVENT_V1};
    use proptest::collection::vec;
    use proptest::prelude::*;
    use proptest::sample::select;
    use serde_json::{Value as Json, json};

    use super::*;

    fn config(default_cases: u32) -> ProptestConfig {
        let cases = std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default_cases);
        ProptestConfig {
            cases,
            ..ProptestConfig::default()
        }
    }

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            vec(any::<u8>(), 0..64),
            vec(any::<u8>(), 0..1024),
            // Long runs of one byte: many items, each a block count of 1 (0x02).
            (any::<u8>(), 0usize..4096).prop_map(|(b, n)| vec![b; n]),
        ]
    }

    /// Names shared by the generated types, so that references resolve, repeat and recurse.
    const NAMES: [&str; 4] = ["A", "B", "Node", "dev.hookline.X"];

    fn size() -> impl Strategy<Value = Json> {
        prop_oneof![
            4 => (0u64..32).prop_map(Json::from),
            1 => Just(json!(1u64 << 40)),
            1 => Just(json!(u64::MAX)),
            1 => Just(json!(i64::MAX)),
            1 => Just(json!(-1)),
            1 => ((1u64 << 20)..(1u64 << 36)).prop_map(Json::from),
        ]
    }

    /// Avro schemas as JSON, of every kind, nested a few levels.
    fn schema() -> impl Strategy<Value = Json> {
        let name = select(&NAMES[..]);
        let leaf = prop_oneof![
            select(
                &[
                    "null", "boolean", "int", "long", "float", "double", "bytes", "string"
                ][..]
            )
            .prop_map(Json::from),
            Just(json!({"type": "long", "logicalType": "timestamp-millis"})),
            Just(json!({"type": "string", "logicalType": "uuid"})),
            Just(json!({"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2})),
            Just(json!({"type": "bytes", "logicalType": "big-decimal"})),
            (name.clone(), size())
                .prop_map(|(n, s)| json!({"type": "fixed", "name": n, "size": s})),
            (name.clone(), size()).prop_map(|(n, s)| json!({
                "type": "fixed", "name": n, "size": s, "logicalType": "decimal", "precision": 3
            })),
            (name.clone(), size()).prop_map(|(n, s)| json!({
                "type": "fixed", "name": n, "size": s, "logicalType": "duration"
            })),
            (name.clone(), vec("[A-Z]{1,3}", 0..4))
                .prop_map(|(n, symbols)| json!({"type": "enum", "name": n, "symbols": symbols})),
            name.clone().prop_map(Json::from),
        ];
        leaf.prop_recursive(6, 32, 4, move |inner| {
            prop_oneof![
                inner
                    .clone()
                    .prop_map(|items| json!({"type": "array", "items": items})),
                inner
                    .clone()
                    .prop_map(|values| json!({"type": "map", "values": values})),
                vec(inner.clone(), 1..4).prop_map(Json::Array),
                (name.clone(), vec(("[a-c]", inner), 0..4)).prop_map(|(n, fields)| {
                    let fields: Vec<Json> = fields
                        .into_iter()
                        .map(|(f, t)| json!({"name": f, "type": t}))
                        .collect();
                    json!({"type": "record", "name": n, "fields": fields})
                }),
            ]
        })
    }

    fn answer(schema: &str) -> String {
        json!({ "schema": schema }).to_string()
    }

    /// Decodes with an accepted schema on a thread with a tokio worker's stack (2 MiB).
    fn decode_on_worker_stack(schema: Schema, datum: Vec<u8>) -> Result<Value> {
        std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || read_datum(1, &schema, &datum))
            .expect("thread")
            .join()
            .expect("no panic")
    }

    /// A datum of a few bytes claiming a string of 2^60 bytes, or of 64 MiB (under
    /// apache-avro's own default bound of 512 MiB), is refused before anything is allocated.
    #[test]
    fn claimed_lengths_past_the_bound_are_refused_before_allocating() {
        let schema = writer_schema(1, "ctx", answer(WEBHOOK_EVENT_V1)).expect("accepted");
        // Zigzag varints of 2^60 and 2^26.
        let huge = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20];
        let large = [0x80, 0x80, 0x80, 0x40];
        for datum in [&huge[..], &large[..]] {
            let error = read_datum(1, &schema, datum).expect_err("refused");
            let Error::Undecodable { source, .. } = &error else {
                panic!("{error}");
            };
            assert!(
                matches!(
                    source.details(),
                    apache_avro::error::Details::MemoryAllocation { maximum, .. }
                        if *maximum == hookline_core::schema::MAX_AVRO_ALLOCATION_BYTES
                ),
                "{error}"
            );
        }
    }

    proptest! {
        #![proptest_config(config(512))]

        #[test]
        fn frames_of_any_bytes(bytes in bytes()) {
            match parse_frame(&bytes) {
                Ok((id, datum)) => {
                    prop_assert_eq!(bytes[0], MAGIC);
                    prop_assert_eq!(id.to_be_bytes(), [bytes[1], bytes[2], bytes[3], bytes[4]]);
                    prop_assert_eq!(datum, &bytes[5..]);
                }
                Err(error) => {
                    prop_assert!(bytes.len() < 5 || bytes[0] != MAGIC);
                    prop_assert!(!error.is_transient());
                }
            }
        }

        #[test]
        fn answers_of_any_text(body in prop_oneof![any::<String>(), "[{}\\[\\]\":a-z ,]{0,64}"]) {
            let _ = writer_schema(1, "ctx", body);
        }

        #[test]
        fn answers_with_any_schema_and_any_datum(
            schema in schema(),
            kind in prop_oneof![6 => Just(None), 2 => Just(Some("AVRO")), 1 => Just(Some("JSON"))],
            datum in bytes(),
        ) {
            let mut body = json!({ "schema": schema.to_string() });
            if let Some(kind) = kind {
                body["schemaType"] = json!(kind);
            }
            if let Ok(schema) = writer_schema(1, "ctx", body.to_string()) {
                let _ = decode_on_worker_stack(schema, datum);
            }
        }

        #[test]
        fn hookline_schemas_with_any_datum(datum in bytes(), dlq in any::<bool>()) {
            let text = if dlq { DLQ_ENVELOPE_CURRENT } else { WEBHOOK_EVENT_V1 };
            let schema = writer_schema(1, "ctx", answer(text)).expect("hookline's schemas pass");
            if let Ok(value) = read_datum(1, &schema, &datum) {
                if dlq {
                    let _ = DlqEnvelope::from_avro_value(value);
                } else {
                    let _ = WebhookEvent::from_avro_value(value);
                }
            }
        }
    }
}
