//! Writer schemas refused before any value is decoded with them. apache-avro's decoder
//! recurses once per level of nesting with no limit of its own, so a recursive schema (a
//! named type that refers to itself, directly or through other types) lets a few bytes of
//! value overflow the stack and abort the process; so can a deep chain of references.
//! hookline's own schemas are neither. A `fixed` type is read into a buffer of its size,
//! allocated before a byte of the value is read and without apache-avro's allocation bound,
//! so a large one lets a few bytes of value abort the process too. An array or map whose
//! items encode in zero bytes (`null`, a record of such fields, `fixed` of size 0) lets a
//! block count of a few bytes claim billions of items: refused too, before the per-record
//! budget (`budget.rs`) would have to refuse each value written with it.

use std::collections::HashMap;
use std::fmt;

use apache_avro::Schema;
use apache_avro::schema::{
    Aliases, DecimalSchema, EnumSchema, FixedSchema, InnerDecimalSchema, Name, RecordSchema,
    UuidSchema,
};
use hookline_core::schema::MAX_AVRO_ALLOCATION_BYTES;

/// How many levels of nested types (records, fields, arrays, maps, unions, references) a
/// writer schema may have. hookline's schemas have five at most. A debug build of
/// apache-avro takes about 32 KiB of stack a level, so a value this deep decodes with room
/// to spare on a tokio worker's 2 MiB (64 levels do not).
pub const MAX_SCHEMA_DEPTH: usize = 32;

/// Why hookline refuses a writer schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemaRefusal {
    /// The registry holds it as another kind of schema (`PROTOBUF`, `JSON`).
    NotAvro {
        /// The registry's `schemaType`.
        schema_type: String,
    },
    /// It is built from other registered schemas (Confluent schema references).
    References,
    /// A named type refers to itself, directly or through other types.
    Recursive {
        /// The full name of that type.
        name: String,
    },
    /// It nests more than [`MAX_SCHEMA_DEPTH`] levels deep.
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// It refers to a named type it does not define first.
    UnknownReference {
        /// The full name referred to.
        name: String,
    },
    /// The items of an array, or the values of a map, encode in zero bytes.
    ZeroSizeItems {
        /// `array` or `map`.
        container: &'static str,
        /// The item type: `null`, or the full name of a record or `fixed` type.
        items: String,
    },
    /// A `fixed` type is larger than the decoder may allocate
    /// ([`MAX_AVRO_ALLOCATION_BYTES`](hookline_core::schema::MAX_AVRO_ALLOCATION_BYTES)).
    FixedTooLarge {
        /// The full name of that type.
        name: String,
        /// Its size in bytes.
        size: usize,
        /// The limit.
        limit: usize,
    },
}

impl fmt::Display for SchemaRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaRefusal::NotAvro { schema_type } => {
                write!(f, "it is a {schema_type} schema, not Avro")
            }
            SchemaRefusal::References => f.write_str("it references other registered schemas"),
            SchemaRefusal::Recursive { name } => {
                write!(f, "it is recursive: {name} refers to itself")
            }
            SchemaRefusal::TooDeep { limit } => {
                write!(f, "it nests more than {limit} levels deep")
            }
            SchemaRefusal::UnknownReference { name } => {
                write!(f, "it refers to {name}, which it does not define")
            }
            SchemaRefusal::ZeroSizeItems { container, items } => write!(
                f,
                "its {container} of {items} holds items that encode in zero bytes, so a few \
                 bytes of value could claim billions of them"
            ),
            SchemaRefusal::FixedTooLarge { name, size, limit } => {
                write!(
                    f,
                    "its fixed type {name} is {size} bytes, over the limit of {limit}"
                )
            }
        }
    }
}

/// How many levels deep `schema` nests; refuses one that is recursive, nests more than
/// [`MAX_SCHEMA_DEPTH`] levels deep or has arrays or maps of zero-size items.
pub(super) fn check(schema: &Schema) -> Result<usize, SchemaRefusal> {
    Walk::default().shape(schema, 1).map(|shape| shape.height)
}

/// What the walk learns of a type.
#[derive(Clone, Copy)]
struct Shape {
    /// Levels of nesting: 1 for a type without parts.
    height: usize,
    /// Whether a value of it may encode in zero bytes.
    zero_size: bool,
}

impl Shape {
    const fn leaf(zero_size: bool) -> Self {
        Shape {
            height: 1,
            zero_size,
        }
    }
}

/// One walk over a schema tree, in the order apache-avro parsed it. A name is defined before
/// it is used, so every cycle between named types passes through a reference to a type whose
/// definition is still being walked: a reference to an enclosing record is recursion, and
/// one to any other type refers to a definition already walked to its end.
#[derive(Default)]
struct Walk {
    /// Names (and aliases) of the records being walked, innermost last.
    open: Vec<Name>,
    /// Shapes of the named types walked to the end, under their names and aliases.
    done: HashMap<Name, Shape>,
}

impl Walk {
    /// The shape of `schema`, found at `level` (1 for the top). The walk stops at
    /// [`MAX_SCHEMA_DEPTH`], so it recurses no deeper than that itself, and follows each
    /// reference only by its recorded shape, so it takes linear time.
    fn shape(&mut self, schema: &Schema, level: usize) -> Result<Shape, SchemaRefusal> {
        if level > MAX_SCHEMA_DEPTH {
            return Err(SchemaRefusal::TooDeep {
                limit: MAX_SCHEMA_DEPTH,
            });
        }
        match schema {
            Schema::Null => Ok(Shape::leaf(true)),
            Schema::Boolean
            | Schema::Int
            | Schema::Long
            | Schema::Float
            | Schema::Double
            | Schema::Bytes
            | Schema::String
            | Schema::BigDecimal
            | Schema::Date
            | Schema::TimeMillis
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos
            | Schema::Uuid(UuidSchema::Bytes | UuidSchema::String)
            | Schema::Decimal(DecimalSchema {
                inner: InnerDecimalSchema::Bytes,
                ..
            }) => Ok(Shape::leaf(false)),
            Schema::Enum(EnumSchema { name, aliases, .. }) => {
                Ok(self.finish(name, aliases, Shape::leaf(false)))
            }
            Schema::Fixed(fixed)
            | Schema::Duration(fixed)
            | Schema::Uuid(UuidSchema::Fixed(fixed))
            | Schema::Decimal(DecimalSchema {
                inner: InnerDecimalSchema::Fixed(fixed),
                ..
            }) => {
                let limit = MAX_AVRO_ALLOCATION_BYTES;
                if fixed.size > limit {
                    return Err(SchemaRefusal::FixedTooLarge {
                        name: fixed.name.fullname(None),
                        size: fixed.size,
                        limit,
                    });
                }
                let shape = Shape::leaf(fixed.size == 0);
                Ok(self.finish(&fixed.name, &fixed.aliases, shape))
            }
            Schema::Array(array) => self.container("array", &array.items, level),
            Schema::Map(map) => self.container("map", &map.types, level),
            Schema::Union(union) => {
                let mut below = 0;
                for variant in union.variants() {
                    below = below.max(self.shape(variant, level + 1)?.height);
                }
                // The variant's index comes first, in one byte at least.
                Ok(Shape {
                    height: 1 + below,
                    zero_size: false,
                })
            }
            Schema::Record(RecordSchema {
                name,
                aliases,
                fields,
                ..
            }) => {
                let opened = self.open.len();
                self.open.extend(names(name, aliases));
                let mut below = 0;
                let mut zero_size = true;
                for field in fields {
                    let shape = self.shape(&field.schema, level + 1)?;
                    below = below.max(shape.height);
                    zero_size &= shape.zero_size;
                }
                self.open.truncate(opened);
                let shape = Shape {
                    height: 1 + below,
                    zero_size,
                };
                Ok(self.finish(name, aliases, shape))
            }
            Schema::Ref { name } => {
                if self.open.contains(name) {
                    return Err(SchemaRefusal::Recursive {
                        name: name.fullname(None),
                    });
                }
                let Some(&shape) = self.done.get(name) else {
                    return Err(SchemaRefusal::UnknownReference {
                        name: name.fullname(None),
                    });
                };
                // Decoding goes through the reference into the named type.
                if level + shape.height > MAX_SCHEMA_DEPTH {
                    return Err(SchemaRefusal::TooDeep {
                        limit: MAX_SCHEMA_DEPTH,
                    });
                }
                Ok(Shape {
                    height: 1 + shape.height,
                    zero_size: shape.zero_size,
                })
            }
        }
    }

    /// The shape of an array or a map of `items`; refused when they encode in zero bytes. A
    /// container itself takes a byte at least (its closing block count).
    fn container(
        &mut self,
        container: &'static str,
        items: &Schema,
        level: usize,
    ) -> Result<Shape, SchemaRefusal> {
        let shape = self.shape(items, level + 1)?;
        if shape.zero_size {
            return Err(SchemaRefusal::ZeroSizeItems {
                container,
                items: item_name(items),
            });
        }
        Ok(Shape {
            height: 1 + shape.height,
            zero_size: false,
        })
    }

    /// Records a named type walked to its end; returns its shape.
    fn finish(&mut self, name: &Name, aliases: &Aliases, shape: Shape) -> Shape {
        for name in names(name, aliases) {
            self.done.insert(name, shape);
        }
        shape
    }
}

/// How a refusal names an item type of zero size: `null`, or its full name.
fn item_name(items: &Schema) -> String {
    match items {
        Schema::Record(RecordSchema { name, .. })
        | Schema::Fixed(FixedSchema { name, .. })
        | Schema::Duration(FixedSchema { name, .. })
        | Schema::Uuid(UuidSchema::Fixed(FixedSchema { name, .. }))
        | Schema::Decimal(DecimalSchema {
            inner: InnerDecimalSchema::Fixed(FixedSchema { name, .. }),
            ..
        })
        | Schema::Ref { name } => name.fullname(None),
        _ => "null".to_owned(),
    }
}

/// A named type's full name and the full names of its aliases (in its namespace).
fn names<'a>(name: &'a Name, aliases: &'a Aliases) -> impl Iterator<Item = Name> + 'a {
    let namespace = name.namespace();
    std::iter::once(name.clone()).chain(
        aliases
            .iter()
            .flatten()
            .map(move |alias| alias.fully_qualified_name(namespace).into_owned()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(json: &str) -> Result<(), SchemaRefusal> {
        depth(json).map(drop)
    }

    fn depth(json: &str) -> Result<usize, SchemaRefusal> {
        check(&Schema::parse_str(json).expect("a valid Avro schema"))
    }

    fn recursive(name: &str) -> Result<(), SchemaRefusal> {
        Err(SchemaRefusal::Recursive {
            name: name.to_owned(),
        })
    }

    #[test]
    fn a_record_that_refers_to_itself_is_recursive() {
        let node = r#"{"type":"record","name":"Node",
            "fields":[{"name":"next","type":["null","Node"]}]}"#;
        assert_eq!(checked(node), recursive("Node"));
        let list = r#"{"type":"record","name":"Tree","namespace":"dev.hookline",
            "fields":[{"name":"children","type":{"type":"array","items":"Tree"}}]}"#;
        assert_eq!(checked(list), recursive("dev.hookline.Tree"));
        let map = r#"{"type":"record","name":"Tree",
            "fields":[{"name":"children","type":{"type":"map","values":"Tree"}}]}"#;
        assert_eq!(checked(map), recursive("Tree"));
    }

    #[test]
    fn a_record_that_refers_to_itself_through_others_is_recursive() {
        let indirect = r#"{"type":"record","name":"A","namespace":"n","fields":[
            {"name":"b","type":{"type":"record","name":"B","fields":[
                {"name":"c","type":["null",{"type":"record","name":"C","fields":[
                    {"name":"a","type":["null","A"]}]}]}]}}]}"#;
        assert_eq!(checked(indirect), recursive("n.A"));
        // The inner record refers to itself, not to the outer one.
        let inner = r#"{"type":"record","name":"Outer","fields":[
            {"name":"x","type":"int"},
            {"name":"list","type":{"type":"record","name":"Cell","namespace":"other",
                "fields":[{"name":"tail","type":["null","Cell"]}]}}]}"#;
        assert_eq!(checked(inner), recursive("other.Cell"));
        // Through an alias of the enclosing record.
        let alias = r#"{"type":"record","name":"Node","aliases":["Link"],
            "fields":[{"name":"next","type":["null","Link"]}]}"#;
        assert_eq!(checked(alias), recursive("Node"));
    }

    #[test]
    fn a_named_type_used_twice_is_not_recursive() {
        let fixed = r#"{"type":"record","name":"Pair","fields":[
            {"name":"a","type":{"type":"fixed","name":"Id","size":16}},
            {"name":"b","type":"Id"},
            {"name":"c","type":["null","Id"]}]}"#;
        assert_eq!(checked(fixed), Ok(()));
        let record = r#"{"type":"record","name":"Line","namespace":"geo","fields":[
            {"name":"from","type":{"type":"record","name":"Point",
                "fields":[{"name":"x","type":"long"},{"name":"y","type":"long"}]}},
            {"name":"to","type":"Point"},
            {"name":"via","type":{"type":"array","items":"geo.Point"}},
            {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]}},
            {"name":"kinds","type":{"type":"map","values":"Kind"}}]}"#;
        assert_eq!(checked(record), Ok(()));
        // A record that holds another record of the same shape but another name.
        let nested = r#"{"type":"record","name":"Outer","fields":[
            {"name":"inner","type":{"type":"record","name":"Inner",
                "fields":[{"name":"v","type":"string"}]}},
            {"name":"again","type":["null","Inner"]}]}"#;
        assert_eq!(checked(nested), Ok(()));
    }

    /// Found by `decode::fuzz`: a registry answer with this schema and an empty datum made
    /// the decoder ask for 64 GiB at once, aborting the process.
    #[test]
    fn a_fixed_type_larger_than_the_decoder_may_allocate_is_refused() {
        let huge = r#"{"type":"record","name":"R","fields":[
            {"name":"f","type":{"type":"fixed","name":"Blob","size":67866582355}}]}"#;
        assert_eq!(
            checked(huge),
            Err(SchemaRefusal::FixedTooLarge {
                name: "Blob".to_owned(),
                size: 67_866_582_355,
                limit: MAX_AVRO_ALLOCATION_BYTES,
            })
        );
        for (logical, size) in [("decimal", 1usize << 40), ("uuid", 1 << 40)] {
            let json = format!(
                r#"{{"type":"fixed","name":"F","size":{size},"logicalType":"{logical}","precision":3}}"#
            );
            assert!(
                matches!(checked(&json), Err(SchemaRefusal::FixedTooLarge { .. })),
                "{logical}"
            );
        }
        let at_limit =
            format!(r#"{{"type":"fixed","name":"F","size":{MAX_AVRO_ALLOCATION_BYTES}}}"#);
        assert_eq!(checked(&at_limit), Ok(()));
    }

    /// The reviewer's bomb: about 80 KB of arrays of `null`s (which take no bytes) decoded
    /// into gigabytes. Item types that may encode in zero bytes are refused in arrays and maps.
    #[test]
    fn arrays_and_maps_of_zero_size_items_are_refused() {
        let refused = |container, items: &str| {
            Err(SchemaRefusal::ZeroSizeItems {
                container,
                items: items.to_owned(),
            })
        };
        let bomb = r#"{"type":"array","items":{"type":"array","items":"null"}}"#;
        assert_eq!(checked(bomb), refused("array", "null"));
        assert_eq!(
            checked(r#"{"type":"map","values":"null"}"#),
            refused("map", "null")
        );
        let empty = r#"{"type":"array","items":{"type":"record","name":"E","fields":[]}}"#;
        assert_eq!(checked(empty), refused("array", "E"));
        let nothing = r#"{"type":"array","items":{"type":"record","name":"N","namespace":"n",
            "fields":[{"name":"a","type":"null"},
                {"name":"b","type":{"type":"fixed","name":"Z","size":0}}]}}"#;
        assert_eq!(checked(nothing), refused("array", "n.N"));
        let fixed = r#"{"type":"map","values":{"type":"fixed","name":"Z","size":0}}"#;
        assert_eq!(checked(fixed), refused("map", "Z"));
        // Through a reference to a zero-size type defined earlier.
        let by_name = r#"{"type":"record","name":"R","fields":[
            {"name":"e","type":{"type":"record","name":"E","fields":[]}},
            {"name":"es","type":{"type":"array","items":"E"}}]}"#;
        assert_eq!(checked(by_name), refused("array", "E"));
        let message = checked(bomb).expect_err("refused").to_string();
        assert!(message.contains("zero bytes"), "{message}");
    }

    #[test]
    fn items_of_a_byte_or_more_are_accepted() {
        for items in [
            r#""boolean""#,
            r#"["null"]"#,
            r#"["null","string"]"#,
            r#"{"type":"array","items":"long"}"#,
            r#"{"type":"enum","name":"One","symbols":["A"]}"#,
            r#"{"type":"fixed","name":"F","size":1}"#,
            r#"{"type":"record","name":"R","fields":[{"name":"a","type":"null"},{"name":"b","type":"int"}]}"#,
        ] {
            for container in [
                format!(r#"{{"type":"array","items":{items}}}"#),
                format!(r#"{{"type":"map","values":{items}}}"#),
            ] {
                assert_eq!(checked(&container), Ok(()), "{container}");
            }
        }
        // A zero-size type is fine outside an array or map.
        let record = r#"{"type":"record","name":"R","fields":[{"name":"n","type":"null"},
            {"name":"e","type":{"type":"record","name":"E","fields":[]}}]}"#;
        assert_eq!(checked(record), Ok(()));
    }

    #[test]
    fn hookline_schemas_pass() {
        for schema in [
            include_str!("../../../../schemas/webhook_event.v1.avsc"),
            include_str!("../../../../schemas/dlq_envelope.v1.avsc"),
            include_str!("../../../../schemas/dlq_envelope.v2.avsc"),
        ] {
            let depth = depth(schema).expect("accepted");
            assert!(depth <= 7, "{depth} levels");
        }
    }

    /// `n` nested arrays of longs: `n + 1` levels.
    fn nested_arrays(n: usize) -> String {
        let mut json = r#""long""#.to_owned();
        for _ in 0..n {
            json = format!(r#"{{"type":"array","items":{json}}}"#);
        }
        json
    }

    #[test]
    fn nesting_is_limited() {
        assert_eq!(checked(&nested_arrays(MAX_SCHEMA_DEPTH - 1)), Ok(()));
        assert_eq!(
            checked(&nested_arrays(MAX_SCHEMA_DEPTH)),
            Err(SchemaRefusal::TooDeep {
                limit: MAX_SCHEMA_DEPTH
            })
        );
    }

    /// A chain of records, each defined inline and referring to the previous one by name:
    /// shallow as JSON, about `2 * n` levels deep to decode.
    fn reference_chain(n: usize) -> String {
        let mut fields = vec![
            r#"{"name":"f0","type":{"type":"record","name":"R0","fields":[{"name":"v","type":"int"}]}}"#
                .to_owned(),
        ];
        for i in 1..=n {
            fields.push(format!(
                r#"{{"name":"f{i}","type":{{"type":"record","name":"R{i}","fields":[{{"name":"prev","type":"R{}"}}]}}}}"#,
                i - 1
            ));
        }
        format!(
            r#"{{"type":"record","name":"Top","fields":[{}]}}"#,
            fields.join(",")
        )
    }

    #[test]
    fn a_long_chain_of_references_is_too_deep() {
        assert_eq!(checked(&reference_chain(5)), Ok(()));
        assert_eq!(
            checked(&reference_chain(5_000)),
            Err(SchemaRefusal::TooDeep {
                limit: MAX_SCHEMA_DEPTH
            })
        );
    }

    #[test]
    fn many_references_to_one_type_are_walked_once() {
        // Each type refers to the one before it eight times: 8^14 paths from the top through
        // 31 levels, walked once each.
        let mut fields =
            vec![r#"{"name":"l0","type":{"type":"record","name":"L0","fields":[]}}"#.to_owned()];
        for i in 1..=14 {
            let refs: Vec<String> = (0..8)
                .map(|k| format!(r#"{{"name":"r{k}","type":"L{}"}}"#, i - 1))
                .collect();
            fields.push(format!(
                r#"{{"name":"l{i}","type":["null",{{"type":"record","name":"L{i}","fields":[{}]}}]}}"#,
                refs.join(",")
            ));
        }
        let json = format!(
            r#"{{"type":"record","name":"Top","fields":[{}]}}"#,
            fields.join(",")
        );
        assert_eq!(depth(&json), Ok(31));
    }
}
