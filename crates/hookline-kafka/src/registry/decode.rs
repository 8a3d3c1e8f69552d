//! The pure half of decoding Confluent-framed Avro: the frame, the registry's answer for a
//! writer schema, the checks a writer schema must pass, and the datum. The fetch is in
//! `mod.rs` with the registry's other calls.

use std::io::Cursor;
use std::sync::Arc;

use apache_avro::Schema;
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::schema::ResolvedSchema;
use apache_avro::types::Value;
use hookline_core::framing;
use serde::Deserialize;

use super::budget;
use super::nesting::{self, SchemaRefusal};
use crate::{Error, Result};

/// A framed value's writer schema id and its Avro datum.
pub(super) fn parse_frame(bytes: &[u8]) -> Result<(u32, &[u8])> {
    framing::split(bytes).ok_or(Error::NotFramed {
        len: bytes.len(),
        first: bytes.first().copied(),
    })
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

/// Decodes `datum` with its writer schema (no reader schema: the value as written), once
/// [`budget::measure`] has found that the value takes at most
/// [`MAX_DECODED_BYTES`](budget::MAX_DECODED_BYTES); allocating at most
/// [`MAX_AVRO_ALLOCATION_BYTES`](hookline_core::schema::MAX_AVRO_ALLOCATION_BYTES) for any
/// length it claims.
pub(super) fn read_datum(id: u32, writer: &Schema, datum: &[u8]) -> Result<Value> {
    hookline_core::schema::limit_avro_allocations();
    let undecodable = |source| Error::Undecodable { id, source };
    let resolved = ResolvedSchema::try_from(writer).map_err(undecodable)?;
    let limit = budget::MAX_DECODED_BYTES;
    budget::measure(writer, resolved.get_names(), datum, limit)
        .map_err(|budget::OverBudget| Error::OverBudget { id, limit })?;
    GenericDatumReader::builder(writer)
        .resolved_writer_schemata(resolved)
        .build()
        .and_then(|reader| reader.read_value(&mut Cursor::new(datum)))
        .map_err(undecodable)
}

/// How many writer schemas a registry client keeps; the least used go first.
const SCHEMA_CACHE_MAX: u64 = 1_000;

/// Writer schemas by id, parsed and checked. Only schemas that passed are kept: a refusal or
/// an unreachable registry is asked again next time. Concurrent misses for one id wait for
/// one fetch.
pub(super) type SchemaCache = moka::future::Cache<u32, Arc<Schema>>;

/// An empty [`SchemaCache`].
pub(super) fn schema_cache() -> SchemaCache {
    moka::future::Cache::new(SCHEMA_CACHE_MAX)
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
}

#[cfg(test)]
mod fuzz;
