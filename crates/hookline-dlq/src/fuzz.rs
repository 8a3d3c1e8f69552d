//! Strategies for the crate's "fuzz" properties over what the tools read from outside: JSON
//! lines, archives, command-line values (tests only). `PROPTEST_CASES` overrides the count.

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

/// Numbers at and past the edges of the integer types a reader may read into.
pub(crate) fn edge_number() -> impl Strategy<Value = Json> {
    prop_oneof![
        Just(Json::from(0)),
        Just(Json::from(-1)),
        Just(Json::from(u64::MAX)),
        Just(Json::from(i64::MIN)),
        Just(Json::from(i64::from(i32::MAX) + 1)),
        Just(Json::from(i64::from(u16::MAX) + 1)),
        Just(Json::from(u64::from(u32::MAX) + 1)),
        Just(Json::from(1e300)),
        Just(Json::from(0.5)),
        any::<i64>().prop_map(Json::from),
    ]
}

/// Any JSON value, nested a few levels.
pub(crate) fn json_value() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        edge_number(),
        any::<String>().prop_map(Json::String),
        "[A-Za-z0-9+/=]{0,16}".prop_map(Json::String),
        prop_oneof![Just("base64"), Just("text"), Just("json"), Just("hex")]
            .prop_map(|s| Json::String(s.to_owned())),
    ];
    leaf.prop_recursive(3, 32, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Json::Array),
            btree_map("[a-z_]{1,10}", inner, 0..6)
                .prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
}

/// `base` (an object) with some fields removed or given values of any shape.
pub(crate) fn edited_object(base: Json) -> impl Strategy<Value = Json> {
    let Json::Object(fields) = base else {
        panic!("not an object");
    };
    let names: Vec<String> = fields.keys().cloned().collect();
    let edit = (
        proptest::sample::select(names),
        proptest::option::weighted(0.8, json_value()),
    );
    vec(edit, 1..5).prop_map(move |edits| {
        let mut fields = fields.clone();
        for (name, value) in edits {
            match value {
                Some(value) => fields.insert(name, value),
                None => fields.remove(&name),
            };
        }
        Json::Object(fields)
    })
}
