//! The versioned Avro schemas of hookline's public records, as text and parsed once.

use std::sync::LazyLock;

use apache_avro::Schema;

/// Avro schema of a webhook event (the value of a record in `webhook-events`), version 1.
pub const WEBHOOK_EVENT_V1: &str = include_str!("../../../schemas/webhook_event.v1.avsc");

/// Avro schema of a dead-letter envelope (the value of a record in `webhook-events.dlq`),
/// version 1. Kept to read and test records written before version 2.
pub const DLQ_ENVELOPE_V1: &str = include_str!("../../../schemas/dlq_envelope.v1.avsc");

/// Avro schema of a dead-letter envelope, version 2: version 1 plus `trace_id` (optional,
/// default null), so it reads version 1 records.
pub const DLQ_ENVELOPE_V2: &str = include_str!("../../../schemas/dlq_envelope.v2.avsc");

/// The dead-letter envelope schema hookline writes and registers; its version is
/// [`ENVELOPE_VERSION`](crate::envelope::ENVELOPE_VERSION).
pub const DLQ_ENVELOPE_CURRENT: &str = DLQ_ENVELOPE_V2;

static WEBHOOK_EVENT: LazyLock<Schema> = LazyLock::new(|| {
    Schema::parse_str(WEBHOOK_EVENT_V1).expect("schemas/webhook_event.v1.avsc is a valid schema")
});

static DLQ_ENVELOPE: LazyLock<Schema> = LazyLock::new(|| {
    Schema::parse_str(DLQ_ENVELOPE_CURRENT).expect("the current DLQ envelope schema is valid")
});

/// The parsed [`WEBHOOK_EVENT_V1`] schema.
pub fn webhook_event_schema() -> &'static Schema {
    &WEBHOOK_EVENT
}

/// The parsed [`DLQ_ENVELOPE_CURRENT`] schema.
pub fn dlq_envelope_schema() -> &'static Schema {
    &DLQ_ENVELOPE
}

#[cfg(test)]
mod tests {
    use apache_avro::schema::RecordSchema;
    use apache_avro::schema_compatibility::SchemaCompatibility;

    use super::*;
    use crate::envelope::ENVELOPE_VERSION;

    fn record(schema: &Schema) -> &RecordSchema {
        let Schema::Record(record) = schema else {
            panic!("not a record schema");
        };
        record
    }

    fn parse(text: &str) -> Schema {
        Schema::parse_str(text).expect("a valid schema")
    }

    #[test]
    fn schemas_parse_with_expected_names() {
        let v1 = parse(DLQ_ENVELOPE_V1);
        for (schema, name) in [
            (webhook_event_schema(), "dev.hookline.WebhookEvent"),
            (dlq_envelope_schema(), "dev.hookline.DlqEnvelope"),
            (&v1, "dev.hookline.DlqEnvelope"),
        ] {
            assert_eq!(record(schema).name.fullname(None), name);
        }
    }

    #[test]
    fn every_dlq_field_is_documented() {
        for text in [DLQ_ENVELOPE_V1, DLQ_ENVELOPE_V2] {
            for field in &record(&parse(text)).fields {
                assert!(field.doc.is_some(), "field {} has no doc", field.name);
            }
        }
    }

    #[test]
    fn the_current_dlq_schema_is_version_2() {
        assert_eq!(DLQ_ENVELOPE_CURRENT, DLQ_ENVELOPE_V2);
        assert_eq!(ENVELOPE_VERSION, 2);
    }

    /// v2 is v1 plus optional fields with defaults: each reads the other's records (what the
    /// registry checks for BACKWARD, FORWARD and FULL).
    #[test]
    fn dlq_v2_extends_v1_with_defaulted_fields_only() {
        let (v1, v2) = (parse(DLQ_ENVELOPE_V1), parse(DLQ_ENVELOPE_V2));
        let old = &record(&v1).fields;
        let new = &record(&v2).fields;
        for (a, b) in old.iter().zip(new) {
            assert_eq!((&a.name, &a.schema), (&b.name, &b.schema));
        }
        for added in &new[old.len()..] {
            assert!(added.default.is_some(), "{} has no default", added.name);
        }
        let names: Vec<&str> = new[old.len()..].iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["trace_id"]);
        SchemaCompatibility::can_read(&v1, &v2).expect("v2 reads v1 records");
        SchemaCompatibility::can_read(&v2, &v1).expect("v1 reads v2 records");
    }
}
