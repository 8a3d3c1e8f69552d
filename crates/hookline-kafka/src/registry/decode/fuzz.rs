//! Outside input never panics the pure half of decoding nor takes more memory than one
//! record may: arbitrary frames, registry answers with arbitrary and generated writer schemas
//! (recursive, deep, huge fixed sizes, unknown references, arrays of zero-size items), and
//! arbitrary datums for every schema accepted, hookline's own included (then read as an
//! event or an envelope, as the dispatcher and the DLQ tools do). This crate's unit tests run
//! under a memory cap: an allocation past it aborts the test binary.

use std::alloc::System;
use std::collections::HashMap;

use apache_avro::schema::ResolvedSchema;
use cap::Cap;
use hookline_core::WebhookEvent;
use hookline_core::envelope::DlqEnvelope;
use hookline_core::schema::{DLQ_ENVELOPE_CURRENT, WEBHOOK_EVENT_V1};
use hookline_testkit::bombs::zigzag as varint;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value as Json, json};

use super::*;

/// What this crate's unit tests may hold at once: room for two decodes at the budget on
/// the test threads of a 2-core machine, far below what a value past it would take.
const MEMORY_CAP: usize = 256 * 1024 * 1024;

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, MEMORY_CAP);

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
        // Runs of one block count, small or large: arrays of arrays claiming many items.
        (
            prop_oneof![1i64..300, 1i64..(1 << 22), -(1i64 << 22)..0],
            1usize..4096
        )
            .prop_map(|(count, n)| varint(count).repeat(n)),
    ]
}

/// The nodes of a decoded value: each one a `Value` in memory at least.
fn nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(nodes).sum(),
        Value::Map(entries) => entries.values().map(nodes).sum(),
        Value::Record(fields) => fields.iter().map(|(_, v)| nodes(v)).sum(),
        Value::Union(_, inner) => nodes(inner),
        _ => 0,
    }
}

/// Writes a datum that decodes with a schema, every choice (block counts and signs, union
/// branches, symbols, lengths, bytes) taken from `entropy`, so that the property below
/// meets values of every shape rather than mostly garbage.
struct DatumWriter<'a> {
    entropy: std::slice::Iter<'a, u8>,
    names: &'a HashMap<apache_avro::schema::Name, &'a Schema>,
    out: Vec<u8>,
}

impl DatumWriter<'_> {
    fn next(&mut self) -> u8 {
        self.entropy.next().copied().unwrap_or(0)
    }

    fn long(&mut self, n: i64) {
        self.out.extend(varint(n));
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.long(i64::try_from(bytes.len()).expect("short"));
        self.out.extend_from_slice(bytes);
    }

    fn random(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next()).collect()
    }

    /// Items of an array or a map in blocks, some with negative counts and sizes.
    fn blocks(&mut self, mut item: impl FnMut(&mut Self)) {
        // Containers stay small past a few kilobytes, so that nesting ends.
        let blocks = if self.out.len() > 2048 {
            0
        } else {
            self.next() % 3
        };
        for _ in 0..blocks {
            let count = i64::from(self.next() % 4) + 1;
            let sized = self.next() % 2 == 1;
            let outer = std::mem::take(&mut self.out);
            for _ in 0..count {
                item(self);
            }
            let block = std::mem::replace(&mut self.out, outer);
            if sized {
                self.long(-count);
                self.long(i64::try_from(block.len()).expect("short"));
            } else {
                self.long(count);
            }
            self.out.extend(block);
        }
        self.long(0);
    }

    fn value(&mut self, schema: &Schema, namespace: Option<&str>) {
        match schema {
            Schema::Null => {}
            Schema::Boolean => {
                let b = self.next() % 2;
                self.out.push(b);
            }
            Schema::Int | Schema::Date | Schema::TimeMillis => {
                let n = i64::from(i32::from_le_bytes([self.next(), self.next(), 0, 0]));
                self.long(n - 30_000);
            }
            Schema::Long
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => {
                let bytes: [u8; 8] = self.random(8).try_into().expect("8 bytes");
                self.long(i64::from_le_bytes(bytes));
            }
            Schema::Float => self.out.extend([0, 0, 128, 63]),
            Schema::Double => self.out.extend(1.5f64.to_le_bytes()),
            Schema::Bytes
            | Schema::Decimal(apache_avro::schema::DecimalSchema {
                inner: apache_avro::schema::InnerDecimalSchema::Bytes,
                ..
            }) => {
                let len = usize::from(self.next() % 9);
                let bytes = self.random(len);
                self.bytes(&bytes);
            }
            Schema::String => {
                let len = usize::from(self.next() % 9);
                let text: Vec<u8> = self.random(len).iter().map(|b| b'a' + b % 26).collect();
                self.bytes(&text);
            }
            Schema::BigDecimal => {
                // Unscaled digits as bytes, then the scale.
                let inner = [varint(1), vec![self.next()], varint(2)].concat();
                self.bytes(&inner);
            }
            Schema::Uuid(apache_avro::schema::UuidSchema::String) => {
                self.bytes(b"67e55044-10b1-426f-9247-bb680e5fe0c8");
            }
            Schema::Uuid(apache_avro::schema::UuidSchema::Bytes) => {
                let bytes = self.random(16);
                self.bytes(&bytes);
            }
            Schema::Fixed(fixed)
            | Schema::Duration(fixed)
            | Schema::Uuid(apache_avro::schema::UuidSchema::Fixed(fixed))
            | Schema::Decimal(apache_avro::schema::DecimalSchema {
                inner: apache_avro::schema::InnerDecimalSchema::Fixed(fixed),
                ..
            }) => {
                let bytes = self.random(fixed.size);
                self.out.extend(bytes);
            }
            Schema::Enum(e) => {
                let symbols = u8::try_from(e.symbols.len().max(1)).unwrap_or(u8::MAX);
                let index = self.next() % symbols;
                self.long(i64::from(index));
            }
            Schema::Array(array) => self.blocks(|w| w.value(&array.items, namespace)),
            Schema::Map(map) => self.blocks(|w| {
                let key = [b'k', w.next()];
                w.bytes(&key);
                w.value(&map.types, namespace);
            }),
            Schema::Union(union) => {
                let count = u8::try_from(union.variants().len().max(1)).unwrap_or(u8::MAX);
                let index = self.next() % count;
                self.long(i64::from(index));
                if let Some(variant) = union.variants().get(usize::from(index)) {
                    self.value(variant, namespace);
                }
            }
            Schema::Record(record) => {
                let name = record.name.fully_qualified_name(namespace);
                for field in &record.fields {
                    self.value(&field.schema, name.namespace());
                }
            }
            Schema::Ref { name } => {
                let name = name.fully_qualified_name(namespace);
                if let Some(&named) = self.names.get(name.as_ref()) {
                    self.value(named, name.namespace());
                }
            }
        }
    }
}

/// The reviewer's bomb, an 80 KB datum that decoded into gigabytes: its schema, arrays
/// of arrays of `null`, is refused; with items of a byte the same shape is refused by
/// the budget once it passes it, and is measured where it is short.
#[test]
fn arrays_of_many_small_items_are_refused_as_a_whole() {
    let bomb = r#"{"type":"array","items":{"type":"array","items":"null"}}"#;
    let error = writer_schema(9, "ctx", answer(bomb)).expect_err("refused");
    assert!(
        matches!(
            error,
            Error::UnsupportedSchema {
                reason: SchemaRefusal::ZeroSizeItems { .. },
                ..
            }
        ),
        "{error}"
    );
    let ones = r#"{"type":"array","items":{"type":"array","items":"boolean"}}"#;
    let schema = writer_schema(9, "ctx", answer(ones)).expect("accepted");
    // 20,000 arrays of 290,000 items claimed, none present: the first claim is measured
    // (16 MB), then the datum ends.
    let claims = [varint(20_000), varint(290_000).repeat(20_000)].concat();
    let error = read_datum(9, &schema, &claims).expect_err("undecodable");
    assert!(matches!(error, Error::Undecodable { id: 9, .. }), "{error}");
    // 10,000 arrays of 100 booleans, all present: 1 MB of datum, 56 MB decoded.
    let inner = [varint(100), vec![1; 100], varint(0)].concat();
    let present = [varint(10_000), inner.repeat(10_000), varint(0)].concat();
    let error = read_datum(9, &schema, &present).expect_err("over the budget");
    assert!(
        matches!(error, Error::OverBudget { id: 9, limit } if limit == budget::MAX_DECODED_BYTES),
        "{error}"
    );
    assert!(!error.is_transient());
    // A tenth of it decodes.
    let fits = [varint(1_000), inner.repeat(1_000), varint(0)].concat();
    let Value::Array(arrays) = read_datum(9, &schema, &fits).expect("decodes") else {
        panic!("an array");
    };
    assert_eq!(arrays.len(), 1_000);
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
        (name.clone(), size()).prop_map(|(n, s)| json!({"type": "fixed", "name": n, "size": s})),
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
                prop_assert_eq!(bytes[0], framing::MAGIC);
                prop_assert_eq!(id.to_be_bytes(), [bytes[1], bytes[2], bytes[3], bytes[4]]);
                prop_assert_eq!(datum, &bytes[5..]);
            }
            Err(error) => {
                prop_assert!(bytes.len() < 5 || bytes[0] != framing::MAGIC);
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

    /// The budget's walk reads a datum as the decoder does: where the decoder returns a
    /// value, the walk read the same bytes (or both met the datum's end, where apache-avro
    /// returns `null` for what is missing) and counted every node of it. Datums are
    /// written for the schema, then cut short or left whole, or arbitrary.
    #[test]
    fn the_walk_reads_what_the_decoder_reads(
        schema in schema(),
        entropy in vec(any::<u8>(), 0..512),
        cut in prop_oneof![3 => Just(None), 1 => any::<prop::sample::Index>().prop_map(Some)],
        garbage in bytes(),
    ) {
        let body = json!({ "schema": schema.to_string() }).to_string();
        let Ok(schema) = writer_schema(1, "ctx", body) else {
            return Ok(());
        };
        // What the decoder cannot resolve, read_datum refuses before measuring.
        let Ok(resolved) = ResolvedSchema::try_from(&schema) else {
            return Ok(());
        };
        let mut writer = DatumWriter {
            entropy: entropy.iter(),
            names: resolved.get_names(),
            out: Vec::new(),
        };
        writer.value(&schema, None);
        let mut written = writer.out;
        if let Some(cut) = cut {
            written.truncate(cut.index(written.len() + 1));
        }
        hookline_core::schema::limit_avro_allocations();
        for datum in [written, garbage] {
            // Over the budget, read_datum refuses it before decoding.
            let limit = budget::MAX_DECODED_BYTES;
            let Ok(measured) = budget::measure(&schema, resolved.get_names(), &datum, limit)
            else {
                continue;
            };
            let mut cursor = Cursor::new(&datum[..]);
            let decoded = GenericDatumReader::builder(&schema)
                .build()
                .and_then(|reader| reader.read_value(&mut cursor));
            let Ok(value) = decoded else {
                continue;
            };
            let position = usize::try_from(cursor.position()).expect("position");
            if measured.complete {
                prop_assert_eq!(measured.read, position);
                let least = nodes(&value) * std::mem::size_of::<Value>();
                prop_assert!(measured.memory >= least);
            } else {
                // What the decoder makes of a missing tail takes no bytes: it is bounded
                // by the schema, not the datum.
                prop_assert_eq!(position, datum.len());
            }
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
