//! The versioned Avro schemas of hookline's public records, as text and parsed once.

use std::sync::LazyLock;

use apache_avro::Schema;

/// Avro schema of a webhook event (the value of a record in `webhook-events`), version 1.
pub const WEBHOOK_EVENT_V1: &str = include_str!("../../../schemas/webhook_event.v1.avsc");

/// Avro schema of a dead-letter envelope (the value of a record in `webhook-events.dlq`), version 1.
pub const DLQ_ENVELOPE_V1: &str = include_str!("../../../schemas/dlq_envelope.v1.avsc");

static WEBHOOK_EVENT: LazyLock<Schema> = LazyLock::new(|| {
    Schema::parse_str(WEBHOOK_EVENT_V1).expect("schemas/webhook_event.v1.avsc is a valid schema")
});

static DLQ_ENVELOPE: LazyLock<Schema> = LazyLock::new(|| {
    Schema::parse_str(DLQ_ENVELOPE_V1).expect("schemas/dlq_envelope.v1.avsc is a valid schema")
});

/// The parsed [`WEBHOOK_EVENT_V1`] schema.
pub fn webhook_event_schema() -> &'static Schema {
    &WEBHOOK_EVENT
}

/// The parsed [`DLQ_ENVELOPE_V1`] schema.
pub fn dlq_envelope_schema() -> &'static Schema {
    &DLQ_ENVELOPE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_parse_with_expected_names() {
        for (schema, name) in [
            (webhook_event_schema(), "dev.hookline.WebhookEvent"),
            (dlq_envelope_schema(), "dev.hookline.DlqEnvelope"),
        ] {
            let Schema::Record(record) = schema else {
                panic!("{name} is not a record schema");
            };
            assert_eq!(record.name.fullname(None), name);
        }
    }

    #[test]
    fn every_dlq_field_is_documented() {
        let Schema::Record(record) = dlq_envelope_schema() else {
            panic!("DlqEnvelope is not a record schema");
        };
        for field in &record.fields {
            assert!(field.doc.is_some(), "field {} has no doc", field.name);
        }
    }
}
