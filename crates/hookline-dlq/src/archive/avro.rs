//! The Avro archive: an object container file of `DlqArchiveRecord`s (the DLQ record's
//! place, key, headers, status and history around the current `DlqEnvelope`), its writer
//! schema embedded, so any Avro reader can open it without a registry. Archives written
//! with an older envelope version read back too.

use std::io::{Read, Write};
use std::path::Path;

use apache_avro::types::Value;
use apache_avro::{Codec, DeflateSettings, Reader, Schema, Writer};
use hookline_core::envelope::DlqEnvelope;
use hookline_core::schema::{dlq_envelope_schema, limit_avro_allocations};
use hookline_kafka::check_writer_schema;

use crate::actions::{Action, ActionKind, History};
use crate::error::{DlqError, Result};
use crate::record::{DlqRecord, Header};
use crate::select::Selected;

/// The archive record's full name.
pub const ARCHIVE_RECORD_NAME: &str = "dev.hookline.DlqArchiveRecord";

/// User metadata key naming the DLQ topic the records came from.
pub const TOPIC_METADATA_KEY: &str = "hookline.dlq.topic";

/// The archive record schema, as JSON text, built around the envelope schema hookline
/// writes ([`dlq_envelope_schema`], the one [`DlqEnvelope::to_avro_value`] follows).
pub fn archive_schema_json() -> String {
    let envelope: serde_json::Value =
        serde_json::to_value(dlq_envelope_schema()).unwrap_or(serde_json::Value::Null);
    let nullable = |t: serde_json::Value| serde_json::json!(["null", t]);
    serde_json::json!({
        "type": "record",
        "name": "DlqArchiveRecord",
        "namespace": "dev.hookline",
        "doc": "A DLQ record archived by `hookline dlq archive`: where it was in the DLQ topic, its key and headers, its status and operator actions at archive time, and the envelope.",
        "fields": [
            {"name": "dlq_partition", "type": "int", "doc": "Partition in the DLQ topic."},
            {"name": "dlq_offset", "type": "long", "doc": "Offset in that partition."},
            {"name": "dlq_timestamp", "type": nullable(serde_json::json!({"type": "long", "logicalType": "timestamp-millis"})), "default": null, "doc": "The DLQ record's timestamp."},
            {"name": "dlq_key", "type": nullable("bytes".into()), "default": null, "doc": "The DLQ record's key."},
            {"name": "envelope", "type": envelope, "doc": "The decoded DLQ envelope."},
            {"name": "dlq_headers", "type": {"type": "array", "items": "DlqHeader"}, "default": [], "doc": "The DLQ record's headers, in order."},
            {"name": "status", "type": "string", "doc": "open, redriven or resolved, at archive time."},
            {"name": "history", "type": {"type": "array", "items": {
                "type": "record", "name": "DlqAction", "doc": "An operator action.",
                "fields": [
                    {"name": "action", "type": "string"},
                    {"name": "at", "type": "string"},
                    {"name": "by", "type": "string"},
                    {"name": "note", "type": ["null", "string"], "default": null},
                    {"name": "target", "type": ["null", "string"], "default": null},
                    {"name": "event_id", "type": ["null", "string"], "default": null},
                    {"name": "role", "type": ["null", "string"], "default": null}
                ]}}, "default": [], "doc": "Operator actions, oldest first."}
        ]
    })
    .to_string()
}

fn avro_error(path: &Path, context: &str) -> impl FnOnce(apache_avro::Error) -> DlqError {
    let path = path.to_owned();
    let context = context.to_owned();
    move |source| DlqError::Avro {
        path,
        context,
        source: Box::new(source),
    }
}

fn nullable(value: Option<Value>) -> Value {
    match value {
        None => Value::Union(0, Box::new(Value::Null)),
        Some(v) => Value::Union(1, Box::new(v)),
    }
}

fn headers_value(headers: &[Header]) -> Value {
    Value::Array(
        headers
            .iter()
            .map(|(key, value)| {
                Value::Record(vec![
                    ("key".into(), Value::String(key.clone())),
                    ("value".into(), nullable(value.clone().map(Value::Bytes))),
                ])
            })
            .collect(),
    )
}

fn to_value(selected: &Selected) -> Value {
    let r = &selected.record;
    let text = |s: &Option<String>| nullable(s.clone().map(Value::String));
    let history = selected
        .history
        .0
        .iter()
        .map(|a| {
            Value::Record(vec![
                ("action".into(), Value::String(a.action.as_str().into())),
                ("at".into(), Value::String(a.at.clone())),
                ("by".into(), Value::String(a.by.clone())),
                ("note".into(), text(&a.note)),
                ("target".into(), text(&a.target)),
                ("event_id".into(), text(&a.event_id)),
                ("role".into(), text(&a.role)),
            ])
        })
        .collect();
    Value::Record(vec![
        ("dlq_partition".into(), Value::Int(r.partition)),
        ("dlq_offset".into(), Value::Long(r.offset)),
        (
            "dlq_timestamp".into(),
            nullable(r.timestamp_ms.map(Value::TimestampMillis)),
        ),
        ("dlq_key".into(), nullable(r.key.clone().map(Value::Bytes))),
        ("envelope".into(), r.envelope.to_avro_value()),
        ("dlq_headers".into(), headers_value(&r.headers)),
        (
            "status".into(),
            Value::String(selected.status().as_str().into()),
        ),
        ("history".into(), Value::Array(history)),
    ])
}

/// The archive schema, parsed.
pub(crate) fn archive_schema(path: &Path) -> Result<Schema> {
    Schema::parse_str(&archive_schema_json())
        .map_err(avro_error(path, "parsing the archive schema"))
}

/// An object container writer on `out` with the topic in its metadata; the header is
/// written with the first record.
pub(crate) fn start<'s, W: Write>(
    path: &Path,
    schema: &'s Schema,
    out: W,
    dlq_topic: &str,
) -> Result<Writer<'s, W>> {
    let mut writer = Writer::with_codec(schema, out, Codec::Deflate(DeflateSettings::default()))
        .map_err(avro_error(path, "starting the file"))?;
    writer
        .add_user_metadata(TOPIC_METADATA_KEY.to_owned(), dlq_topic)
        .map_err(avro_error(path, "writing metadata"))?;
    Ok(writer)
}

/// Appends one record to a writer made by [`start`].
pub(crate) fn append<W: Write>(
    path: &Path,
    writer: &mut Writer<'_, W>,
    selected: &Selected,
) -> Result<()> {
    writer
        .append_value(to_value(selected))
        .map_err(avro_error(path, "appending a record"))?;
    Ok(())
}

/// Ends a writer made by [`start`]: the last block, then the output itself.
pub(crate) fn end<W: Write>(path: &Path, writer: Writer<'_, W>) -> Result<W> {
    writer
        .into_inner()
        .map_err(avro_error(path, "finishing the file"))
}

/// Writes an Avro archive to `out`; returns how many records it holds.
pub fn write(
    path: &Path,
    out: impl Write,
    dlq_topic: &str,
    records: impl Iterator<Item = Selected>,
) -> Result<u64> {
    let schema = archive_schema(path)?;
    let mut writer = start(path, &schema, out, dlq_topic)?;
    let mut count = 0;
    for selected in records {
        append(path, &mut writer, &selected)?;
        count += 1;
    }
    let mut inner = end(path, writer)?;
    inner.flush().map_err(DlqError::io(path))?;
    Ok(count)
}

/// Reads an Avro archive written by [`write`]. Its embedded schema is checked as a registry's
/// writer schema is ([`check_writer_schema`]), and no length the file claims is allocated
/// past [`MAX_AVRO_ALLOCATION_BYTES`](hookline_core::schema::MAX_AVRO_ALLOCATION_BYTES).
pub fn read(path: &Path, input: impl Read) -> Result<Vec<Selected>> {
    let mut out = Vec::new();
    read_each(path, input, |selected| {
        out.push(selected);
        true
    })?;
    Ok(out)
}

/// Reads an Avro archive as [`read`] does, one record at a time: `each` is given every
/// record in order until it returns `false`. Returns how many records it was given.
pub fn read_each(
    path: &Path,
    input: impl Read,
    mut each: impl FnMut(Selected) -> bool,
) -> Result<u64> {
    limit_avro_allocations();
    let reader = Reader::new(input).map_err(avro_error(path, "reading the header"))?;
    check_writer_schema(reader.writer_schema()).map_err(|refusal| DlqError::Archive {
        path: path.to_owned(),
        item: 0,
        problem: format!("its schema cannot be read safely: {refusal}"),
    })?;
    let name = match reader.writer_schema() {
        Schema::Record(record) => record.name.fullname(None),
        _ => String::new(),
    };
    if name != ARCHIVE_RECORD_NAME {
        return Err(DlqError::Archive {
            path: path.to_owned(),
            item: 0,
            problem: format!("its records are `{name}`, not {ARCHIVE_RECORD_NAME}"),
        });
    }
    let mut count = 0;
    for (index, value) in reader.enumerate() {
        let value = value.map_err(avro_error(path, "reading a record"))?;
        let selected = from_value(value).map_err(|problem| DlqError::Archive {
            path: path.to_owned(),
            item: index + 1,
            problem,
        })?;
        count += 1;
        if !each(selected) {
            break;
        }
    }
    Ok(count)
}

fn strip(mut value: Value) -> Value {
    while let Value::Union(_, inner) = value {
        value = *inner;
    }
    value
}

fn from_value(value: Value) -> std::result::Result<Selected, String> {
    let Value::Record(fields) = value else {
        return Err("not a record".into());
    };
    let mut get = std::collections::HashMap::new();
    for (name, value) in fields {
        get.insert(name, strip(value));
    }
    let mut take = |name: &str| get.remove(name).unwrap_or(Value::Null);
    let bytes = |v: Value| match v {
        Value::Bytes(b) => Some(b),
        _ => None,
    };
    let headers = |v: Value| -> Vec<Header> {
        let Value::Array(items) = v else {
            return Vec::new();
        };
        items
            .into_iter()
            .filter_map(|item| match item {
                Value::Record(f) => {
                    let mut key = String::new();
                    let mut value = None;
                    for (name, v) in f {
                        match (name.as_str(), strip(v)) {
                            ("key", Value::String(k)) => key = k,
                            ("value", v) => value = bytes(v),
                            _ => {}
                        }
                    }
                    Some((key, value))
                }
                _ => None,
            })
            .collect()
    };
    let (Value::Int(partition), Value::Long(offset)) = (take("dlq_partition"), take("dlq_offset"))
    else {
        return Err("dlq_partition or dlq_offset is missing".into());
    };
    let timestamp_ms = match take("dlq_timestamp") {
        Value::TimestampMillis(ms) | Value::Long(ms) => Some(ms),
        _ => None,
    };
    let key = bytes(take("dlq_key"));
    let envelope = DlqEnvelope::from_avro_value(take("envelope")).map_err(|e| e.to_string())?;
    let record_headers = headers(take("dlq_headers"));
    let history = match take("history") {
        Value::Array(items) => items
            .into_iter()
            .map(action_from_value)
            .collect::<std::result::Result<Vec<_>, _>>()?,
        _ => Vec::new(),
    };
    Ok(Selected {
        record: DlqRecord {
            partition,
            offset,
            timestamp_ms,
            key,
            headers: record_headers,
            envelope,
        },
        history: History(history),
    })
}

fn action_from_value(value: Value) -> std::result::Result<Action, String> {
    let Value::Record(fields) = value else {
        return Err("an action is not a record".into());
    };
    let mut action = Action::new(ActionKind::Note, 0, "");
    for (name, v) in fields {
        let text = match strip(v) {
            Value::String(s) => Some(s),
            _ => None,
        };
        match name.as_str() {
            "action" => {
                action.action = match text.as_deref() {
                    Some("redriven") => ActionKind::Redriven,
                    Some("resolved") => ActionKind::Resolved,
                    Some("note") => ActionKind::Note,
                    other => return Err(format!("unknown action {other:?}")),
                }
            }
            "at" => action.at = text.unwrap_or_default(),
            "by" => action.by = text.unwrap_or_default(),
            "note" => action.note = text,
            "target" => action.target = text,
            "event_id" => action.event_id = text,
            "role" => action.role = text,
            _ => {}
        }
    }
    Ok(action)
}

#[cfg(test)]
mod tests {
    use hookline_core::envelope::ErrorReason;
    use hookline_core::schema::{DLQ_ENVELOPE_V2, DLQ_ENVELOPE_V3};

    use super::*;
    use crate::record::fixtures::record;

    /// An archive written with an older envelope schema embedded, holding `selected`'s
    /// envelope without the `later` fields.
    fn older_archive(envelope_schema: &str, later: &[&str], selected: &Selected) -> Vec<u8> {
        let mut schema: serde_json::Value =
            serde_json::from_str(&archive_schema_json()).expect("JSON");
        for field in schema["fields"].as_array_mut().expect("fields") {
            if field["name"] == "envelope" {
                field["type"] = serde_json::from_str(envelope_schema).expect("schema is JSON");
            }
        }
        let schema = Schema::parse_str(&schema.to_string()).expect("a schema");
        let Value::Record(mut fields) = to_value(selected) else {
            panic!("not a record");
        };
        for (name, value) in &mut fields {
            if let (true, Value::Record(envelope)) = (name == "envelope", value) {
                envelope.retain(|(k, _)| !later.contains(&k.as_str()));
            }
        }
        let mut writer = Writer::new(&schema, Vec::new()).expect("a writer");
        writer
            .append_value(Value::Record(fields))
            .expect("an older archive record");
        writer.into_inner().expect("finished")
    }

    /// An archive written before envelope v3: its embedded schema holds the v2 envelope.
    #[test]
    fn an_archive_with_the_v2_envelope_reads_back_as_not_truncated() {
        let selected = Selected {
            record: record(0, 2, "ep-a", ErrorReason::RetriesExhausted, 1_000),
            history: History::default(),
        };
        let later = [
            "original_payload_truncated",
            "original_payload_size",
            "tenant_id",
        ];
        let bytes = older_archive(DLQ_ENVELOPE_V2, &later, &selected);
        let read = read(Path::new("old.avro"), bytes.as_slice()).expect("reads");
        assert_eq!(read, [selected]);
        assert!(!read[0].record.envelope.original_payload_truncated);
        assert_eq!(read[0].record.envelope.original_payload_size, None);
    }

    /// An archive written before envelope v4 has no tenant; one written now keeps it.
    #[test]
    fn the_tenant_is_archived_and_a_v3_archive_reads_back_without_one() {
        let mut selected = Selected {
            record: record(0, 2, "ep-a", ErrorReason::RetriesExhausted, 1_000),
            history: History::default(),
        };
        let bytes = older_archive(DLQ_ENVELOPE_V3, &["tenant_id"], &selected);
        let read_v3 = read(Path::new("v3.avro"), bytes.as_slice()).expect("reads");
        assert_eq!(read_v3, [selected.clone()]);
        assert_eq!(read_v3[0].record.envelope.tenant_id, None);

        selected.record.envelope.tenant_id = Some("acme".into());
        let mut out = Vec::new();
        write(
            Path::new("a.avro"),
            &mut out,
            "dlq",
            [selected.clone()].into_iter(),
        )
        .expect("written");
        let back = read(Path::new("a.avro"), out.as_slice()).expect("reads");
        assert_eq!(back[0].record.envelope.tenant_id.as_deref(), Some("acme"));
        assert_eq!(back, [selected]);
    }
}

/// Outside input never panics the Avro archive reader nor makes it allocate what the file
/// only claims: arbitrary bytes after the magic, archives as written with bytes edited, and
/// archives whose embedded schema the reader cannot decode with safely.
#[cfg(test)]
mod fuzz {
    use hookline_core::envelope::ErrorReason;
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::*;
    use crate::fuzz::config;
    use crate::record::fixtures::record;

    fn archive() -> Vec<u8> {
        let records = [0, 1].map(|offset| Selected {
            record: record(0, offset, "ep-a", ErrorReason::RetriesExhausted, 1_000),
            history: History(vec![Action::new(ActionKind::Note, 5, "ops")]),
        });
        let mut out = Vec::new();
        write(Path::new("a.avro"), &mut out, "dlq", records.into_iter()).expect("written");
        out
    }

    fn zigzag(n: i64) -> Vec<u8> {
        let mut z = ((n << 1) ^ (n >> 63)) as u64;
        let mut out = Vec::new();
        while z >= 0x80 {
            out.push((z as u8) | 0x80);
            z >>= 7;
        }
        out.push(z as u8);
        out
    }

    fn text(s: &str) -> Vec<u8> {
        [zigzag(s.len() as i64), s.as_bytes().to_vec()].concat()
    }

    /// An object container file with `schema`, no codec, and one block of `count` items
    /// claiming `size` bytes and holding `data`.
    fn container(schema: &str, count: i64, size: i64, data: &[u8]) -> Vec<u8> {
        let sync = [7u8; 16];
        let mut out = b"Obj\x01".to_vec();
        out.extend(zigzag(2));
        out.extend(text("avro.schema"));
        out.extend(text(schema));
        out.extend(text("avro.codec"));
        out.extend(text("null"));
        out.push(0);
        out.extend(sync);
        out.extend(zigzag(count));
        out.extend(zigzag(size));
        out.extend(data);
        out.extend(sync);
        out
    }

    fn read_on_worker_stack(bytes: Vec<u8>) -> Result<Vec<Selected>> {
        std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || read(Path::new("x.avro"), bytes.as_slice()))
            .expect("thread")
            .join()
            .expect("no panic")
    }

    proptest! {
        #![proptest_config(config(256))]

        #[test]
        fn any_bytes_after_the_magic(rest in vec(any::<u8>(), 0..512)) {
            let _ = read_on_worker_stack([&b"Obj\x01"[..], &rest].concat());
        }

        #[test]
        fn written_archives_with_edited_bytes(
            edits in vec((any::<usize>(), 1u8..), 1..4),
            cut in proptest::option::of(any::<usize>()),
        ) {
            let mut bytes = archive();
            for (at, x) in edits {
                let at = at % bytes.len();
                bytes[at] ^= x;
            }
            if let Some(cut) = cut {
                bytes.truncate(cut % (bytes.len() + 1));
            }
            let _ = read_on_worker_stack(bytes);
        }

        #[test]
        fn blocks_claiming_any_size(count in any::<i64>(), size in any::<i64>()) {
            let schema = archive_schema_json();
            let _ = read_on_worker_stack(container(&schema, count, size, &[0; 8]));
        }
    }

    #[test]
    fn an_archive_reads_back() {
        assert_eq!(read_on_worker_stack(archive()).expect("reads").len(), 2);
    }

    /// A block claiming 64 MiB (under apache-avro's own default bound of 512 MiB, which it
    /// would fill with zeros before reading) is refused before anything is allocated.
    #[test]
    fn a_block_claiming_more_than_the_bound_is_refused_before_allocating() {
        let bytes = container(&archive_schema_json(), 1, 64 << 20, &[]);
        let error = read_on_worker_stack(bytes).expect_err("refused");
        let DlqError::Avro { source, .. } = &error else {
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

    /// An archive whose records are a recursive `DlqArchiveRecord`, 100000 levels deep in a
    /// file of 100 KB, read on a tokio worker's stack.
    #[test]
    fn an_archive_with_a_recursive_schema_is_refused() {
        let schema = r#"{"type":"record","name":"DlqArchiveRecord","namespace":"dev.hookline",
            "fields":[{"name":"next","type":["null","DlqArchiveRecord"]}]}"#;
        let depth = 100_000;
        let data = [vec![2; depth], vec![0]].concat();
        let bytes = container(schema, 1, data.len() as i64, &data);
        let error = read_on_worker_stack(bytes).expect_err("refused");
        assert!(error.to_string().contains("recursive"), "{error}");
    }

    /// An archive whose schema has a fixed type of 64 GiB: read into a buffer of that size.
    #[test]
    fn an_archive_with_a_huge_fixed_type_is_refused() {
        let schema = r#"{"type":"record","name":"DlqArchiveRecord","namespace":"dev.hookline",
            "fields":[{"name":"f","type":{"type":"fixed","name":"F","size":68719476736}}]}"#;
        let bytes = container(schema, 1, 1, &[0]);
        let error = read_on_worker_stack(bytes).expect_err("refused");
        assert!(error.to_string().contains("fixed"), "{error}");
    }
}
