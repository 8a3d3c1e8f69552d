//! What one record may cost to decode, bounded as a whole before it is decoded. apache-avro
//! bounds each allocation it makes for a length it reads (a string, one block of an array),
//! not the value: a datum of a few hundred kilobytes can claim millions of small items, each
//! a 56-byte value, and decode into gigabytes. [`measure`] walks the datum with its writer
//! schema the way apache-avro's decoder reads it, allocating nothing, and adds up the memory
//! the decoded value would take; a record over [`MAX_DECODED_BYTES`] is refused before the
//! decoder sees it. Written by hand: apache-avro has no budget per value and no hook in its
//! decoder. A property test (`decode::fuzz`) holds the walk to the decoder: wherever the
//! decoder reads a value, the walk reads the same bytes.

use std::collections::HashMap;
use std::mem::size_of;

use apache_avro::Schema;
use apache_avro::schema::{
    DecimalSchema, EnumSchema, InnerDecimalSchema, Name, NamespaceRef, RecordSchema, UuidSchema,
};
use apache_avro::types::Value;
use hookline_core::schema::MAX_AVRO_ALLOCATION_BYTES;

/// The most memory one record's decoded value may take: twice the largest single allocation
/// the decoder may make, so a payload at that limit and everything around it decode.
pub const MAX_DECODED_BYTES: usize = 2 * MAX_AVRO_ALLOCATION_BYTES;

/// One value, as the decoder returns it or keeps it in an array or a union's box.
const VALUE: usize = size_of::<Value>();
/// One field of a record, or one entry of a map: its name and its value.
const NAMED: usize = size_of::<(String, Value)>();
/// One entry of a map, in a hash table at most half full (a control byte each).
const MAP_ENTRY: usize = 2 * (NAMED + 1);

/// A datum whose decoded value would take more than its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct OverBudget;

/// What the walk found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Measure {
    /// Bytes the decoded value would take, estimated from above as apache-avro lays it out.
    pub(super) memory: usize,
    /// Bytes of the datum read: where the decoder stops too, or where it fails.
    pub(super) read: usize,
    /// Whether the datum held the whole value.
    pub(super) complete: bool,
}

/// Measures the value `datum` decodes to with `schema` (already checked: not recursive, not
/// deep), resolving references through `names`; refuses it as soon as it passes `limit`. A
/// datum that does not decode is measured up to where the decoder fails, so that the
/// decoder's own error is the one reported.
pub(super) fn measure(
    schema: &Schema,
    names: &HashMap<Name, &Schema>,
    datum: &[u8],
    limit: usize,
) -> Result<Measure, OverBudget> {
    let mut walk = Walk {
        datum,
        read: 0,
        memory: 0,
        limit,
        names,
    };
    let complete = match walk.charge(VALUE).and_then(|()| walk.value(schema, None)) {
        Ok(()) => true,
        Err(Stop::Malformed) => false,
        Err(Stop::OverBudget) => return Err(OverBudget),
    };
    Ok(Measure {
        memory: walk.memory,
        read: walk.read,
        complete,
    })
}

/// Why the walk stopped early.
enum Stop {
    /// The value passed the budget.
    OverBudget,
    /// The datum does not decode here (the decoder says why).
    Malformed,
}

struct Walk<'a> {
    datum: &'a [u8],
    read: usize,
    memory: usize,
    limit: usize,
    names: &'a HashMap<Name, &'a Schema>,
}

impl Walk<'_> {
    fn charge(&mut self, bytes: usize) -> Result<(), Stop> {
        self.memory = self
            .memory
            .checked_add(bytes)
            .filter(|memory| *memory <= self.limit)
            .ok_or(Stop::OverBudget)?;
        Ok(())
    }

    /// Charges `count` items of `size` bytes each, as one allocation.
    fn charge_items(&mut self, count: usize, size: usize) -> Result<(), Stop> {
        self.charge(count.checked_mul(size).ok_or(Stop::OverBudget)?)
    }

    fn skip(&mut self, len: usize) -> Result<(), Stop> {
        let end = self.read.checked_add(len).ok_or(Stop::Malformed)?;
        if end > self.datum.len() {
            return Err(Stop::Malformed);
        }
        self.read = end;
        Ok(())
    }

    /// A zigzag varint, as apache-avro reads one: at most ten bytes.
    fn long(&mut self) -> Result<i64, Stop> {
        let mut raw = 0u64;
        for shift in (0..10).map(|i| i * 7) {
            let &byte = self.datum.get(self.read).ok_or(Stop::Malformed)?;
            self.read += 1;
            raw |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(Stop::Malformed)
    }

    /// A length or an index: a long that is not negative.
    fn index(&mut self) -> Result<usize, Stop> {
        usize::try_from(self.long()?).map_err(|_| Stop::Malformed)
    }

    /// Bytes or a string: their length, then their bytes, copied into the value.
    fn bytes(&mut self) -> Result<(), Stop> {
        let len = self.index()?;
        self.fixed(len)
    }

    /// A fixed number of bytes, copied into the value. A length past the datum's end is the
    /// decoder's to report.
    fn fixed(&mut self, size: usize) -> Result<(), Stop> {
        self.skip(size)?;
        self.charge(size)
    }

    /// The item count of an array's or a map's next block (0 after the last): a negative
    /// count is followed by the block's size in bytes, which the decoder reads and ignores.
    fn block(&mut self) -> Result<usize, Stop> {
        let count = self.long()?;
        let count = if count < 0 {
            self.long()?;
            count.checked_neg().ok_or(Stop::Malformed)?
        } else {
            count
        };
        usize::try_from(count).map_err(|_| Stop::Malformed)
    }

    /// Reads a value of `schema` whose own [`VALUE`] is charged already, charging what it
    /// holds beyond that. `namespace` resolves references, as the decoder does.
    fn value(&mut self, schema: &Schema, namespace: NamespaceRef) -> Result<(), Stop> {
        match schema {
            Schema::Null => Ok(()),
            Schema::Boolean => self.skip(1),
            Schema::Int
            | Schema::Long
            | Schema::Date
            | Schema::TimeMillis
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => self.long().map(drop),
            Schema::Float => self.skip(4),
            Schema::Double => self.skip(8),
            Schema::Bytes
            | Schema::String
            | Schema::BigDecimal
            | Schema::Uuid(UuidSchema::Bytes | UuidSchema::String)
            | Schema::Decimal(DecimalSchema {
                inner: InnerDecimalSchema::Bytes,
                ..
            }) => self.bytes(),
            Schema::Fixed(fixed)
            | Schema::Duration(fixed)
            | Schema::Uuid(UuidSchema::Fixed(fixed))
            | Schema::Decimal(DecimalSchema {
                inner: InnerDecimalSchema::Fixed(fixed),
                ..
            }) => self.fixed(fixed.size),
            // The symbol is copied into the value.
            Schema::Enum(EnumSchema { symbols, .. }) => {
                let symbol = symbols.get(self.index()?).ok_or(Stop::Malformed)?;
                self.charge(symbol.len())
            }
            Schema::Array(array) => loop {
                let count = self.block()?;
                if count == 0 {
                    return Ok(());
                }
                // The decoder reserves the whole block before reading its first item.
                self.charge_items(count, VALUE)?;
                for _ in 0..count {
                    self.value(&array.items, namespace)?;
                }
            },
            Schema::Map(map) => loop {
                let count = self.block()?;
                if count == 0 {
                    return Ok(());
                }
                self.charge_items(count, MAP_ENTRY)?;
                for _ in 0..count {
                    self.bytes()?;
                    self.value(&map.types, namespace)?;
                }
            },
            Schema::Union(union) => {
                let variant = union.variants().get(self.index()?).ok_or(Stop::Malformed)?;
                // Boxed.
                self.charge(VALUE)?;
                self.value(variant, namespace)
            }
            Schema::Record(RecordSchema { name, fields, .. }) => {
                let name = name.fully_qualified_name(namespace);
                self.charge_items(fields.len(), NAMED)?;
                for field in fields {
                    // Each field's name is copied into the value.
                    self.charge(field.name.len())?;
                    self.value(&field.schema, name.namespace())?;
                }
                Ok(())
            }
            Schema::Ref { name } => {
                let name = name.fully_qualified_name(namespace);
                let &named = self.names.get(name.as_ref()).ok_or(Stop::Malformed)?;
                self.value(named, name.namespace())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use apache_avro::schema::ResolvedSchema;
    use hookline_testkit::bombs::zigzag as long;

    use super::*;

    fn measured(schema: &str, datum: &[u8], limit: usize) -> Result<Measure, OverBudget> {
        let schema = Schema::parse_str(schema).expect("valid schema");
        let resolved = ResolvedSchema::try_from(&schema).expect("resolves");
        measure(&schema, resolved.get_names(), datum, limit)
    }

    #[test]
    fn a_record_costs_its_fields_names_and_contents() {
        let schema = r#"{"type":"record","name":"R","fields":[
            {"name":"id","type":"string"},{"name":"n","type":"long"}]}"#;
        let datum = [long(5), b"evt-1".to_vec(), long(42)].concat();
        let got = measured(schema, &datum, usize::MAX).expect("within");
        assert_eq!(got.read, datum.len());
        assert_eq!(got.memory, VALUE + 2 * NAMED + "id".len() + "n".len() + 5);
    }

    #[test]
    fn arrays_are_charged_per_block_before_their_items_are_read() {
        let schema = r#"{"type":"array","items":"boolean"}"#;
        // One block claiming a billion booleans, with two present: refused at the claim.
        let claim = [long(1_000_000_000), vec![1, 0]].concat();
        assert_eq!(measured(schema, &claim, 1 << 20), Err(OverBudget));
        // A negative count is followed by the block's size; both blocks are counted.
        let blocks = [long(-2), long(2), vec![1, 0], long(1), vec![1], long(0)].concat();
        let got = measured(schema, &blocks, usize::MAX).expect("within");
        assert_eq!((got.read, got.memory), (blocks.len(), 4 * VALUE));
    }

    #[test]
    fn many_small_arrays_add_up_to_the_limit() {
        // The shape of the reviewer's bomb with items of one byte: 10,000 arrays of 100
        // booleans, 1 MB of datum, about 56 MB decoded.
        let schema = r#"{"type":"array","items":{"type":"array","items":"boolean"}}"#;
        let inner = [long(100), vec![1; 100], long(0)].concat();
        let datum = [long(10_000), inner.repeat(10_000), long(0)].concat();
        assert_eq!(measured(schema, &datum, MAX_DECODED_BYTES), Err(OverBudget));
        let got = measured(schema, &datum, usize::MAX).expect("within");
        assert_eq!(got.read, datum.len());
        assert_eq!(got.memory, VALUE + 10_000 * VALUE + 1_000_000 * VALUE);
    }

    #[test]
    fn a_datum_that_does_not_decode_is_measured_up_to_its_fault() {
        let schema = r#"{"type":"record","name":"R","fields":[
            {"name":"s","type":"string"},{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}}]}"#;
        // A string longer than the datum.
        let short = [long(50), b"abc".to_vec()].concat();
        assert_eq!(
            measured(schema, &short, usize::MAX).expect("measured").read,
            1
        );
        // An enum index out of range.
        let index = [long(1), b"a".to_vec(), long(3)].concat();
        assert_eq!(
            measured(schema, &index, usize::MAX).expect("measured").read,
            3
        );
        // A varint of eleven bytes.
        let varint = [vec![0xff; 10], vec![0x01]].concat();
        assert_eq!(
            measured(schema, &varint, usize::MAX)
                .expect("measured")
                .read,
            10
        );
    }

    #[test]
    fn references_resolve_in_their_namespace() {
        let schema = r#"{"type":"record","name":"Outer","namespace":"a","fields":[
            {"name":"p","type":{"type":"record","name":"Point","fields":[{"name":"x","type":"string"}]}},
            {"name":"q","type":"Point"},
            {"name":"r","type":"a.Point"}]}"#;
        let datum = [long(1), b"x".to_vec(), long(2), b"yy".to_vec(), long(0)].concat();
        let got = measured(schema, &datum, usize::MAX).expect("within");
        assert_eq!(got.read, datum.len());
        let point = NAMED + "x".len();
        assert_eq!(got.memory, VALUE + 3 * NAMED + 3 + 3 * point + 1 + 2);
    }
}
