//! The versioned Avro schemas of hookline's public records, as text and parsed once.

use std::sync::LazyLock;

use apache_avro::Schema;

/// Avro schema of a webhook event (the value of a record in `webhook-events`), version 1.
/// Kept to read and test records written before version 2.
pub const WEBHOOK_EVENT_V1: &str = include_str!("../../../schemas/webhook_event.v1.avsc");

/// Avro schema of a webhook event, version 2: version 1 with `endpoint_id` optional (a
/// tenant event has none) and `tenant_id` and `channels` added, all with defaults, so it
/// reads version 1 records (BACKWARD). Kept to read and test records written before
/// version 3.
pub const WEBHOOK_EVENT_V2: &str = include_str!("../../../schemas/webhook_event.v2.avsc");

/// Avro schema of a webhook event, version 3: version 2 plus `expires_at` (optional,
/// default null), so it reads version 1 and 2 records, and they read its (FULL).
pub const WEBHOOK_EVENT_V3: &str = include_str!("../../../schemas/webhook_event.v3.avsc");

/// The event schema hookline writes and registers.
pub const WEBHOOK_EVENT_CURRENT: &str = WEBHOOK_EVENT_V3;

/// Avro schema of a dead-letter envelope (the value of a record in `webhook-events.dlq`),
/// version 1. Kept to read and test records written before version 2.
pub const DLQ_ENVELOPE_V1: &str = include_str!("../../../schemas/dlq_envelope.v1.avsc");

/// Avro schema of a dead-letter envelope, version 2: version 1 plus `trace_id` (optional,
/// default null), so it reads version 1 records. Kept to read and test records written
/// before version 3.
pub const DLQ_ENVELOPE_V2: &str = include_str!("../../../schemas/dlq_envelope.v2.avsc");

/// Avro schema of a dead-letter envelope, version 3: version 2 plus
/// `original_payload_truncated` (default false) and `original_payload_size` (optional,
/// default null), so it reads version 1 and 2 records. Kept to read and test records
/// written before version 4.
pub const DLQ_ENVELOPE_V3: &str = include_str!("../../../schemas/dlq_envelope.v3.avsc");

/// Avro schema of a dead-letter envelope, version 4: version 3 plus `tenant_id` (optional,
/// default null), so it reads version 1, 2 and 3 records. Kept to read and test records
/// written before version 5.
pub const DLQ_ENVELOPE_V4: &str = include_str!("../../../schemas/dlq_envelope.v4.avsc");

/// Avro schema of a dead-letter envelope, version 5: version 4 with the reasons `EXPIRED`
/// and `CANCELLED` added at the end of the `ErrorReason` enum, so it reads version 1 to 4
/// records (BACKWARD); a version 4 reader cannot read a record parked with a new reason.
pub const DLQ_ENVELOPE_V5: &str = include_str!("../../../schemas/dlq_envelope.v5.avsc");

/// The dead-letter envelope schema hookline writes and registers; its version is
/// [`ENVELOPE_VERSION`](crate::envelope::ENVELOPE_VERSION).
pub const DLQ_ENVELOPE_CURRENT: &str = DLQ_ENVELOPE_V5;

/// Avro schema of an attempt-log record (the value of a record in `<events>.attempts`),
/// version 1.
pub const WEBHOOK_ATTEMPT_V1: &str = include_str!("../../../schemas/webhook_attempt.v1.avsc");

/// Version 2 of the attempt-log schema: version 1 with `published_at` and `redriven_from`
/// (nullable, default null), a backward-compatible evolution.
pub const WEBHOOK_ATTEMPT_V2: &str = include_str!("../../../schemas/webhook_attempt.v2.avsc");

/// The attempt-log schema hookline writes and registers.
pub const WEBHOOK_ATTEMPT_CURRENT: &str = WEBHOOK_ATTEMPT_V2;

static WEBHOOK_ATTEMPT: LazyLock<Schema> = LazyLock::new(|| {
    Schema::parse_str(WEBHOOK_ATTEMPT_CURRENT).expect("the current attempt schema is valid")
});

static WEBHOOK_EVENT: LazyLock<Schema> = LazyLock::new(|| {
    Schema::parse_str(WEBHOOK_EVENT_CURRENT).expect("the current event schema is valid")
});

static DLQ_ENVELOPE: LazyLock<Schema> = LazyLock::new(|| {
    Schema::parse_str(DLQ_ENVELOPE_CURRENT).expect("the current DLQ envelope schema is valid")
});

/// The most bytes the Avro decoder may allocate for one length it reads from a datum (a
/// string, bytes, or the items of an array or map) or for one block of a container file:
/// 16 MiB, well above the largest record Kafka delivers to hookline (the producer's
/// `message.max.bytes`, 1000000 by default). Without it, a few bytes claiming a length
/// just under apache-avro's own default (512 MiB) are allocated for.
pub const MAX_AVRO_ALLOCATION_BYTES: usize = 16 * 1024 * 1024;

/// Bounds the Avro decoder's allocations to [`MAX_AVRO_ALLOCATION_BYTES`] for the whole
/// process, and returns the bound in force. apache-avro keeps the first bound it is given
/// and takes its own default on its first decode, so every decoder of outside data calls
/// this first; after the first call it costs one atomic load.
pub fn limit_avro_allocations() -> usize {
    apache_avro::util::max_allocation_bytes(MAX_AVRO_ALLOCATION_BYTES)
}

/// The parsed [`WEBHOOK_EVENT_CURRENT`] schema.
pub fn webhook_event_schema() -> &'static Schema {
    &WEBHOOK_EVENT
}

/// The parsed [`WEBHOOK_ATTEMPT_CURRENT`] schema.
pub fn webhook_attempt_schema() -> &'static Schema {
    &WEBHOOK_ATTEMPT
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
        let (v1, v2) = (parse(DLQ_ENVELOPE_V1), parse(DLQ_ENVELOPE_V2));
        let v3 = parse(DLQ_ENVELOPE_V3);
        for (schema, name) in [
            (webhook_event_schema(), "dev.hookline.WebhookEvent"),
            (dlq_envelope_schema(), "dev.hookline.DlqEnvelope"),
            (&v1, "dev.hookline.DlqEnvelope"),
            (&v2, "dev.hookline.DlqEnvelope"),
            (&v3, "dev.hookline.DlqEnvelope"),
        ] {
            assert_eq!(record(schema).name.fullname(None), name);
        }
    }

    #[test]
    fn every_dlq_field_is_documented() {
        for text in [
            DLQ_ENVELOPE_V1,
            DLQ_ENVELOPE_V2,
            DLQ_ENVELOPE_V3,
            DLQ_ENVELOPE_V4,
            DLQ_ENVELOPE_V5,
        ] {
            for field in &record(&parse(text)).fields {
                assert!(field.doc.is_some(), "field {} has no doc", field.name);
            }
        }
    }

    #[test]
    fn the_current_dlq_schema_is_version_5() {
        assert_eq!(DLQ_ENVELOPE_CURRENT, DLQ_ENVELOPE_V5);
        assert_eq!(ENVELOPE_VERSION, 5);
    }

    /// v5 is v4 field for field but for the reason enum, which gains two symbols at its
    /// end: v5 reads v4 records (BACKWARD, what the registry checks), v4 cannot read v5's.
    #[test]
    fn dlq_v5_reads_v4_and_earlier() {
        let (v4, v5) = (parse(DLQ_ENVELOPE_V4), parse(DLQ_ENVELOPE_V5));
        let names = |s: &Schema| -> Vec<String> {
            record(s).fields.iter().map(|f| f.name.clone()).collect()
        };
        assert_eq!(names(&v4), names(&v5));
        for older in [
            DLQ_ENVELOPE_V1,
            DLQ_ENVELOPE_V2,
            DLQ_ENVELOPE_V3,
            DLQ_ENVELOPE_V4,
        ] {
            SchemaCompatibility::can_read(&parse(older), &v5).expect("v5 reads older records");
        }
        // A v4 reader cannot resolve a record parked with a new reason (apache-avro's
        // compatibility check does not compare enum symbols; resolution does).
        let expired = crate::envelope::DlqEnvelope {
            error_reason: crate::envelope::ErrorReason::Expired,
            ..crate::envelope::fixtures::minimal()
        };
        let datum = expired.to_avro_datum().expect("encode");
        assert!(crate::avro_util::decode(&datum, &v5, &v4).is_err());
        assert!(crate::avro_util::decode(&datum, &v5, &v5).is_ok());
    }

    /// v3 adds `expires_at`, nullable with a null default: each of v1, v2 and v3 reads the
    /// others' deliveries.
    #[test]
    fn event_v3_extends_v2_with_expires_at() {
        assert_extends_with_defaulted_fields(WEBHOOK_EVENT_V2, WEBHOOK_EVENT_V3, &["expires_at"]);
        let (v1, v3) = (parse(WEBHOOK_EVENT_V1), parse(WEBHOOK_EVENT_V3));
        SchemaCompatibility::can_read(&v1, &v3).expect("v3 reads v1 records");
        let expires = record(&v3).fields.last().expect("a field");
        assert_eq!(expires.default, Some(serde_json::Value::Null));
        assert!(expires.doc.is_some());
        assert_eq!(webhook_event_schema(), &v3);
    }

    /// `new` is `old` plus the fields `added`, each with a default: each reads the other's
    /// records (what the registry checks for BACKWARD, FORWARD and FULL).
    fn assert_extends_with_defaulted_fields(old: &str, new: &str, added: &[&str]) {
        let (old, new) = (parse(old), parse(new));
        let (old_fields, new_fields) = (&record(&old).fields, &record(&new).fields);
        for (a, b) in old_fields.iter().zip(new_fields) {
            assert_eq!((&a.name, &a.schema), (&b.name, &b.schema));
        }
        for field in &new_fields[old_fields.len()..] {
            assert!(field.default.is_some(), "{} has no default", field.name);
        }
        let names: Vec<&str> = new_fields[old_fields.len()..]
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(names, added);
        SchemaCompatibility::can_read(&old, &new).expect("the new schema reads old records");
        SchemaCompatibility::can_read(&new, &old).expect("the old schema reads new records");
    }

    /// v2 reads v1 events (BACKWARD, what the registry checks), and v1 reads v2 deliveries.
    #[test]
    fn event_v2_reads_v1() {
        let (v1, v2) = (parse(WEBHOOK_EVENT_V1), parse(WEBHOOK_EVENT_V2));
        SchemaCompatibility::can_read(&v1, &v2).expect("v2 reads v1 records");
        let added: Vec<&str> = record(&v2).fields[record(&v1).fields.len()..]
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(added, ["tenant_id", "channels"]);
        for field in &record(&v2).fields {
            assert!(field.doc.is_some(), "field {} has no doc", field.name);
        }
    }

    #[test]
    fn dlq_v2_extends_v1_with_defaulted_fields_only() {
        assert_extends_with_defaulted_fields(DLQ_ENVELOPE_V1, DLQ_ENVELOPE_V2, &["trace_id"]);
    }

    /// v3 reads v1 and v2 records (BACKWARD over both, what the registry checks under
    /// BACKWARD_TRANSITIVE too), and they read v3's.
    #[test]
    fn dlq_v3_extends_v2_and_v1_with_defaulted_fields_only() {
        let added = ["original_payload_truncated", "original_payload_size"];
        assert_extends_with_defaulted_fields(DLQ_ENVELOPE_V2, DLQ_ENVELOPE_V3, &added);
        assert_extends_with_defaulted_fields(
            DLQ_ENVELOPE_V1,
            DLQ_ENVELOPE_V3,
            &["trace_id", added[0], added[1]],
        );
        let v3 = parse(DLQ_ENVELOPE_V3);
        let defaults: Vec<_> = record(&v3).fields[record(&parse(DLQ_ENVELOPE_V2)).fields.len()..]
            .iter()
            .map(|f| f.default.clone())
            .collect();
        assert_eq!(
            defaults,
            [
                Some(serde_json::Value::Bool(false)),
                Some(serde_json::Value::Null)
            ]
        );
    }

    /// v4 reads v1, v2 and v3 records (BACKWARD_TRANSITIVE), and they read v4's; the tenant
    /// defaults to null.
    #[test]
    fn dlq_v4_extends_v3_v2_and_v1_with_defaulted_fields_only() {
        let v3_added = ["original_payload_truncated", "original_payload_size"];
        assert_extends_with_defaulted_fields(DLQ_ENVELOPE_V3, DLQ_ENVELOPE_V4, &["tenant_id"]);
        assert_extends_with_defaulted_fields(
            DLQ_ENVELOPE_V2,
            DLQ_ENVELOPE_V4,
            &[v3_added[0], v3_added[1], "tenant_id"],
        );
        assert_extends_with_defaulted_fields(
            DLQ_ENVELOPE_V1,
            DLQ_ENVELOPE_V4,
            &["trace_id", v3_added[0], v3_added[1], "tenant_id"],
        );
        let v4 = parse(DLQ_ENVELOPE_V4);
        let tenant = record(&v4).fields.last().expect("a field");
        assert_eq!(tenant.name, "tenant_id");
        assert_eq!(tenant.default, Some(serde_json::Value::Null));
    }
}
