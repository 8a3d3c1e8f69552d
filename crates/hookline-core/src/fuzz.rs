//! Strategies for the crate's "fuzz" properties: arbitrary and structure-aware mutated
//! inputs for every decoder of outside data (tests only).
//!
//! Each property asserts only that the decoder returns (an `Err`, or a value that holds
//! up), never panics nor allocates without bound. `PROPTEST_CASES` overrides the case count.

use apache_avro::types::Value as AvroValue;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::Value as Json;

/// A proptest config of `default_cases` cases, or `PROPTEST_CASES` when it is set.
pub(crate) fn config(default_cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    Config {
        cases,
        ..Config::default()
    }
}

/// Arbitrary bytes, short and long.
pub(crate) fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![vec(any::<u8>(), 0..64), vec(any::<u8>(), 0..2048)]
}

/// Numbers at and past the edges of every integer type a decoder may read into.
pub(crate) fn edge_number() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_owned()),
        Just("-1".to_owned()),
        Just("-0".to_owned()),
        Just(u64::MAX.to_string()),
        Just("18446744073709551616".to_owned()),
        Just(i64::MIN.to_string()),
        Just("-9223372036854775809".to_owned()),
        Just(i32::MAX.to_string()),
        Just("2147483648".to_owned()),
        Just(u16::MAX.to_string()),
        Just("65536".to_owned()),
        Just("1e308".to_owned()),
        Just("1e999".to_owned()),
        Just("-1e999".to_owned()),
        Just("5e-324".to_owned()),
        Just("0.5".to_owned()),
        Just("9".repeat(400)),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|n| format!("{n:e}")),
    ]
}

/// JSON text that is deep: arrays and objects nested up to thousands of levels, closed or not.
pub(crate) fn deep_json() -> impl Strategy<Value = String> {
    let depth = prop_oneof![1usize..300, 1_000usize..5_000];
    (depth, any::<bool>(), any::<bool>()).prop_map(|(depth, objects, closed)| {
        let (open, close) = if objects {
            (r#"{"a":"#, "}")
        } else {
            ("[", "]")
        };
        let mut text = open.repeat(depth);
        text.push('1');
        if closed {
            text.push_str(&close.repeat(depth));
        }
        text
    })
}

/// Any JSON value, nested a few levels.
pub(crate) fn json_value() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        any::<u64>().prop_map(Json::from),
        any::<f64>().prop_map(Json::from),
        any::<String>().prop_map(Json::String),
        "[a-zA-Z0-9+/=_-]{0,24}".prop_map(Json::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..8).prop_map(Json::Array),
            btree_map(any::<String>(), inner, 0..8)
                .prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
}

/// A JSON value as raw text: any value, an edge number, deep nesting, or text that is
/// hardly JSON at all.
pub(crate) fn raw_json() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => json_value().prop_map(|v| v.to_string()),
        2 => edge_number(),
        1 => deep_json(),
        1 => Just(r#""\ud800""#.to_owned()),
        1 => Just(r#""\u0000\n\t""#.to_owned()),
        1 => any::<String>(),
    ]
}

/// What a mutation does to one field of a JSON object.
#[derive(Clone, Debug)]
pub(crate) enum FieldEdit {
    /// Remove the field.
    Remove,
    /// Replace its value with this raw JSON text.
    Set(String),
    /// Repeat the field with this raw JSON text as its second value.
    Repeat(String),
}

/// Edits of a JSON object: which field (by index into `names`, or a new name) and what.
pub(crate) fn object_edits(
    names: &'static [&'static str],
) -> impl Strategy<Value = Vec<(String, FieldEdit)>> {
    let name = prop_oneof![
        4 => proptest::sample::select(names).prop_map(str::to_owned),
        1 => "[a-z_]{1,12}",
    ];
    let edit = prop_oneof![
        1 => Just(FieldEdit::Remove),
        4 => raw_json().prop_map(FieldEdit::Set),
        1 => raw_json().prop_map(FieldEdit::Repeat),
    ];
    vec((name, edit), 0..5)
}

/// The object `base` (field name and raw JSON text) with `edits` applied, as JSON text.
pub(crate) fn edited_object(base: &[(&str, String)], edits: &[(String, FieldEdit)]) -> String {
    let mut fields: Vec<(String, String)> = base
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    for (name, edit) in edits {
        match edit {
            FieldEdit::Remove => fields.retain(|(k, _)| k != name),
            FieldEdit::Set(raw) => match fields.iter_mut().find(|(k, _)| k == name) {
                Some(field) => field.1 = raw.clone(),
                None => fields.push((name.clone(), raw.clone())),
            },
            FieldEdit::Repeat(raw) => fields.push((name.clone(), raw.clone())),
        }
    }
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{v}", Json::String(k.clone())))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// A byte-level edit of an encoded input.
#[derive(Clone, Debug)]
pub(crate) enum ByteEdit {
    /// Flip the byte at this position (modulo the length).
    Flip(usize, u8),
    /// Insert bytes at this position.
    Insert(usize, Vec<u8>),
    /// Remove the byte at this position.
    Remove(usize),
    /// Cut the input to this length.
    Truncate(usize),
    /// Insert the zigzag varint of this number (a length prefix, in Avro) at this position.
    Varint(usize, i64),
}

/// Lengths an Avro decoder may be told to allocate for: small, around the allocation
/// limit, and far beyond it.
pub(crate) fn claimed_len() -> impl Strategy<Value = i64> {
    prop_oneof![
        0i64..64,
        Just(-1),
        Just(i64::MIN),
        Just(i64::MAX),
        Just(1 << 60),
        Just(1 << 32),
        (16i64 << 20)..(16i64 << 20) + 2,
        (1i64 << 20)..(1i64 << 40),
    ]
}

/// Up to `max` byte edits.
pub(crate) fn byte_edits(max: usize) -> impl Strategy<Value = Vec<ByteEdit>> {
    let edit = prop_oneof![
        3 => (any::<usize>(), 1u8..).prop_map(|(at, x)| ByteEdit::Flip(at, x)),
        1 => (any::<usize>(), vec(any::<u8>(), 1..8)).prop_map(|(at, b)| ByteEdit::Insert(at, b)),
        1 => any::<usize>().prop_map(ByteEdit::Remove),
        1 => any::<usize>().prop_map(ByteEdit::Truncate),
        2 => (any::<usize>(), claimed_len()).prop_map(|(at, n)| ByteEdit::Varint(at, n)),
    ];
    vec(edit, 1..=max)
}

/// `input` with `edits` applied.
pub(crate) fn edited_bytes(input: &[u8], edits: &[ByteEdit]) -> Vec<u8> {
    let mut out = input.to_vec();
    for edit in edits {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
        match edit {
            ByteEdit::Flip(i, x) if !out.is_empty() => {
                let i = i % out.len();
                out[i] ^= x;
            }
            ByteEdit::Flip(..) => {}
            ByteEdit::Insert(i, bytes) => {
                let i = at(*i, out.len());
                out.splice(i..i, bytes.iter().copied());
            }
            ByteEdit::Remove(i) if !out.is_empty() => {
                out.remove(i % out.len());
            }
            ByteEdit::Remove(_) => {}
            ByteEdit::Truncate(i) => out.truncate(at(*i, out.len())),
            ByteEdit::Varint(i, n) => {
                let i = at(*i, out.len());
                out.splice(i..i, zigzag(*n));
            }
        }
    }
    out
}

/// Avro's zigzag varint encoding of `n`.
pub(crate) fn zigzag(n: i64) -> Vec<u8> {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    let mut out = Vec::new();
    loop {
        let byte = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// Any Avro value without parts.
pub(crate) fn avro_leaf() -> impl Strategy<Value = AvroValue> {
    prop_oneof![
        Just(AvroValue::Null),
        any::<bool>().prop_map(AvroValue::Boolean),
        prop_oneof![Just(-1), Just(0), Just(65_536), any::<i32>()].prop_map(AvroValue::Int),
        any::<i64>().prop_map(AvroValue::Long),
        any::<i64>().prop_map(AvroValue::TimestampMillis),
        any::<f64>().prop_map(AvroValue::Double),
        ".{0,12}".prop_map(AvroValue::String),
        vec(any::<u8>(), 0..32).prop_map(AvroValue::Bytes),
        vec(any::<u8>(), 0..32).prop_map(|b| AvroValue::Fixed(b.len(), b)),
        (any::<u32>(), "[A-Za-z_]{0,24}").prop_map(|(i, s)| AvroValue::Enum(i, s)),
    ]
}

/// Any Avro value, nested a few levels: the shapes a datum of some writer schema decodes to.
pub(crate) fn avro_value() -> impl Strategy<Value = AvroValue> {
    avro_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (any::<u32>(), inner.clone()).prop_map(|(i, v)| AvroValue::Union(i, Box::new(v))),
            vec(inner.clone(), 0..4).prop_map(AvroValue::Array),
            proptest::collection::hash_map(".{0,8}", inner.clone(), 0..4).prop_map(AvroValue::Map),
            vec(("[a-z_]{1,10}", inner), 0..4).prop_map(AvroValue::Record),
        ]
    })
}

/// A field value: mostly one without parts.
fn avro_field() -> impl Strategy<Value = AvroValue> {
    prop_oneof![4 => avro_leaf(), 1 => avro_value()]
}

/// A record value with fields named as in a schema (and some others), of any shape.
pub(crate) fn avro_record(names: &'static [&'static str]) -> impl Strategy<Value = AvroValue> {
    let name = prop_oneof![
        6 => proptest::sample::select(names).prop_map(str::to_owned),
        1 => "[a-z_]{1,12}",
    ];
    vec((name, avro_field()), 0..names.len() + 4).prop_map(AvroValue::Record)
}

/// `base` (a record value) with some of its fields replaced by values of any shape,
/// removed, or wrapped in unions.
pub(crate) fn edited_record(base: AvroValue) -> impl Strategy<Value = AvroValue> {
    let AvroValue::Record(fields) = base else {
        panic!("not a record");
    };
    let len = fields.len();
    let edit = prop_oneof![
        (0..len, avro_field()).prop_map(|(i, v)| (i, Some(v))),
        (0..len).prop_map(|i| (i, None)),
    ];
    (Just(fields), vec(edit, 1..4), any::<bool>()).prop_map(|(mut fields, edits, wrap)| {
        let mut removed = Vec::new();
        for (i, value) in edits {
            match value {
                Some(v) => fields[i].1 = v,
                None => removed.push(i),
            }
        }
        let mut fields: Vec<_> = fields
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !removed.contains(i))
            .map(|(_, f)| f)
            .collect();
        if wrap {
            for (_, v) in &mut fields {
                *v = AvroValue::Union(1, Box::new(std::mem::replace(v, AvroValue::Null)));
            }
        }
        AvroValue::Record(fields)
    })
}
