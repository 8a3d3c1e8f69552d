//! Helpers to read fields out of generic Avro record values (crate-private).

use std::collections::HashMap;
use std::sync::OnceLock;

use apache_avro::Schema;
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::types::Value;
use apache_avro::writer::datum::GenericDatumWriter;

/// What is wrong with a record value; each module maps it into its own error type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FieldProblem {
    NotARecord,
    Missing {
        field: &'static str,
    },
    WrongType {
        field: &'static str,
        expected: &'static str,
    },
}

/// The fields of an Avro record, by name, with union wrappers removed.
pub(crate) struct RecordFields(HashMap<String, Value>);

/// Encodes a value as a bare Avro datum of `schema`, validating it first (the tests' own
/// schemas; hookline's go through a [`CachedWriter`]).
#[cfg(test)]
pub(crate) fn encode(schema: &Schema, value: Value) -> Result<Vec<u8>, apache_avro::Error> {
    GenericDatumWriter::builder(schema)
        .build()?
        .write_value_to_vec(value)
}

/// The datum writer of one static schema, built once: building it resolves the schema's
/// names, which cost more than encoding a record (it was done per record before).
pub(crate) struct CachedWriter(OnceLock<Option<GenericDatumWriter<'static>>>);

impl CachedWriter {
    pub(crate) const fn new() -> Self {
        CachedWriter(OnceLock::new())
    }

    /// [`encode`] with the writer built once for `schema`.
    pub(crate) fn encode(
        &self,
        schema: &'static Schema,
        value: Value,
    ) -> Result<Vec<u8>, apache_avro::Error> {
        let mut out = Vec::new();
        self.encode_into(schema, value, &mut out)?;
        Ok(out)
    }

    /// Appends `value` as a bare Avro datum of `schema` to `out`, validated first, with the
    /// writer built once (always the same schema for one `CachedWriter`).
    pub(crate) fn encode_into(
        &self,
        schema: &'static Schema,
        value: Value,
        out: &mut Vec<u8>,
    ) -> Result<(), apache_avro::Error> {
        self.with(schema, |writer| writer.write_value(out, value).map(drop))
    }

    /// Runs `write` with the writer of `schema`, built once. A writer that cannot be built
    /// is built again, for its error.
    fn with(
        &self,
        schema: &'static Schema,
        write: impl FnOnce(&GenericDatumWriter<'static>) -> Result<(), apache_avro::Error>,
    ) -> Result<(), apache_avro::Error> {
        let cached = self
            .0
            .get_or_init(|| GenericDatumWriter::builder(schema).build().ok());
        match cached {
            Some(writer) => write(writer),
            None => write(&GenericDatumWriter::builder(schema).build()?),
        }
    }
}

/// Decodes a bare Avro datum written with `writer` into a value resolved into `reader`;
/// also returns how many bytes were left over. Allocates at most
/// [`MAX_AVRO_ALLOCATION_BYTES`](crate::schema::MAX_AVRO_ALLOCATION_BYTES) for any length
/// the datum claims.
pub(crate) fn decode(
    datum: &[u8],
    writer: &Schema,
    reader: &Schema,
) -> Result<(Value, usize), apache_avro::Error> {
    crate::schema::limit_avro_allocations();
    let mut rest = datum;
    let value = GenericDatumReader::builder(writer)
        .reader_schema(reader)
        .build()?
        .read_value(&mut rest)?;
    Ok((value, rest.len()))
}

/// Strips any `Union` wrappers around a value.
pub(crate) fn strip_union(mut value: Value) -> Value {
    while let Value::Union(_, inner) = value {
        value = *inner;
    }
    value
}

/// An `["null", T]` union value: branch 0 for `None`, branch 1 for `Some`.
pub(crate) fn nullable(value: Option<Value>) -> Value {
    match value {
        None => Value::Union(0, Box::new(Value::Null)),
        Some(v) => Value::Union(1, Box::new(v)),
    }
}

impl RecordFields {
    /// Takes a `Record` value apart.
    pub(crate) fn new(value: Value) -> Result<Self, FieldProblem> {
        match strip_union(value) {
            Value::Record(fields) => Ok(Self(
                fields
                    .into_iter()
                    .map(|(k, v)| (k, strip_union(v)))
                    .collect(),
            )),
            _ => Err(FieldProblem::NotARecord),
        }
    }

    /// The field's value, `None` when absent or null.
    pub(crate) fn take(&mut self, field: &'static str) -> Option<Value> {
        match self.0.remove(field) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }

    fn required(&mut self, field: &'static str) -> Result<Value, FieldProblem> {
        self.take(field).ok_or(FieldProblem::Missing { field })
    }

    pub(crate) fn string(&mut self, field: &'static str) -> Result<String, FieldProblem> {
        let v = self.required(field)?;
        as_string(field, v)
    }

    pub(crate) fn opt_string(
        &mut self,
        field: &'static str,
    ) -> Result<Option<String>, FieldProblem> {
        self.take(field).map(|v| as_string(field, v)).transpose()
    }

    pub(crate) fn bytes(&mut self, field: &'static str) -> Result<Vec<u8>, FieldProblem> {
        let v = self.required(field)?;
        as_bytes(field, v)
    }

    pub(crate) fn opt_bytes(
        &mut self,
        field: &'static str,
    ) -> Result<Option<Vec<u8>>, FieldProblem> {
        self.take(field).map(|v| as_bytes(field, v)).transpose()
    }

    pub(crate) fn int(&mut self, field: &'static str) -> Result<i32, FieldProblem> {
        let v = self.required(field)?;
        as_int(field, v)
    }

    pub(crate) fn opt_int(&mut self, field: &'static str) -> Result<Option<i32>, FieldProblem> {
        self.take(field).map(|v| as_int(field, v)).transpose()
    }

    /// An optional `boolean`.
    pub(crate) fn opt_bool(&mut self, field: &'static str) -> Result<Option<bool>, FieldProblem> {
        match self.take(field) {
            None => Ok(None),
            Some(Value::Boolean(b)) => Ok(Some(b)),
            Some(_) => Err(FieldProblem::WrongType {
                field,
                expected: "a boolean",
            }),
        }
    }

    /// A `long`, also accepting `int` and `timestamp-millis` values.
    pub(crate) fn long(&mut self, field: &'static str) -> Result<i64, FieldProblem> {
        let v = self.required(field)?;
        as_long(field, v)
    }

    /// An optional `long`, also accepting `int` and `timestamp-millis` values.
    pub(crate) fn opt_long(&mut self, field: &'static str) -> Result<Option<i64>, FieldProblem> {
        self.take(field).map(|v| as_long(field, v)).transpose()
    }
}

fn as_string(field: &'static str, v: Value) -> Result<String, FieldProblem> {
    match v {
        Value::String(s) => Ok(s),
        _ => Err(FieldProblem::WrongType {
            field,
            expected: "a string",
        }),
    }
}

pub(crate) fn as_bytes(field: &'static str, v: Value) -> Result<Vec<u8>, FieldProblem> {
    match strip_union(v) {
        Value::Bytes(b) | Value::Fixed(_, b) => Ok(b),
        _ => Err(FieldProblem::WrongType {
            field,
            expected: "bytes",
        }),
    }
}

fn as_int(field: &'static str, v: Value) -> Result<i32, FieldProblem> {
    match v {
        Value::Int(i) => Ok(i),
        _ => Err(FieldProblem::WrongType {
            field,
            expected: "an int",
        }),
    }
}

fn as_long(field: &'static str, v: Value) -> Result<i64, FieldProblem> {
    match v {
        Value::Long(l) | Value::TimestampMillis(l) => Ok(l),
        Value::Int(i) => Ok(i64::from(i)),
        _ => Err(FieldProblem::WrongType {
            field,
            expected: "a long",
        }),
    }
}
