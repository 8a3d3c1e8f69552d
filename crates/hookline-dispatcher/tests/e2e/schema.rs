//! End-to-end tests of the DLQ envelope's schema evolution against the real registry (and,
//! for the dispatcher's start-up, the real broker): v2, v3 and the current schema register
//! over v1 under BACKWARD, records framed with v1's and v3's ids still decode, an incompatible schema is refused, and a
//! dispatcher whose DLQ subject holds an incompatible schema fails at start-up.
//! Every test has its own topics and subject.

use std::collections::BTreeMap;
use std::time::Duration;

use apache_avro::types::Value;
use hookline_core::WebhookEvent;
use hookline_core::envelope::{DlqEnvelope, DlqHeader, ENVELOPE_VERSION, ErrorReason};
use hookline_core::schema::{
    DLQ_ENVELOPE_CURRENT, DLQ_ENVELOPE_V1, DLQ_ENVELOPE_V2, DLQ_ENVELOPE_V3, DLQ_ENVELOPE_V4,
};
use hookline_dispatcher::{DispatchError, DispatcherConfig, start};
use hookline_kafka::{Compatibility, Registry};
use hookline_testkit::{TestTopics, kafka_settings, read_all, registry_settings, unique_name};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(60);
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// The current schema plus a required field without a default: it cannot read the current
/// schema's records, so the registry refuses it under BACKWARD. Written only here.
fn incompatible_next() -> String {
    let mut schema: serde_json::Value =
        serde_json::from_str(DLQ_ENVELOPE_CURRENT).expect("the current schema is JSON");
    schema["fields"]
        .as_array_mut()
        .expect("fields")
        .push(serde_json::json!({"name": "region", "type": "string", "doc": "Required."}));
    schema.to_string()
}

/// A schema under the DLQ envelope's name that v2 cannot read (none of its fields).
const FOREIGN: &str = r#"{"type": "record", "name": "DlqEnvelope", "namespace": "dev.hookline",
  "fields": [{"name": "legacy_id", "type": "long"}]}"#;

fn envelope(version: i32) -> DlqEnvelope {
    DlqEnvelope {
        envelope_version: version,
        event_id: unique_name("evt"),
        event_type: Some("invoice.paid".into()),
        endpoint_id: Some("ep-1".into()),
        endpoint_url: Some("https://example.com/hook".into()),
        original_topic: "webhook-events".into(),
        original_partition: 1,
        original_offset: 42,
        original_key: Some(b"ep-1".to_vec()),
        original_payload_bytes: br#"{"invoice":1}"#.to_vec(),
        original_headers: vec![DlqHeader {
            key: "traceparent".into(),
            value: Some(TRACEPARENT.as_bytes().to_vec()),
        }],
        error_reason: ErrorReason::RetriesExhausted,
        error_message: "HTTP 503".into(),
        last_status_code: Some(503),
        attempts: 3,
        first_attempt_at_ms: Some(1_700_000_000_000),
        error_timestamp_ms: 1_700_000_001_000,
        dispatcher_id: "d-1".into(),
        original_payload_truncated: false,
        original_payload_size: None,
        tenant_id: None,
    }
}

/// `e` as a value of an older schema: the current value without the `later` fields.
fn older_value(e: &DlqEnvelope, later: &[&str]) -> Value {
    let Value::Record(fields) = e.to_avro_value() else {
        panic!("not a record");
    };
    Value::Record(
        fields
            .into_iter()
            .filter(|(k, _)| !later.contains(&k.as_str()))
            .collect(),
    )
}

/// `e` as a value of the v1 schema, as a dispatcher before v2 wrote it.
fn v1_value(e: &DlqEnvelope) -> Value {
    older_value(
        e,
        &[
            "trace_id",
            "original_payload_truncated",
            "original_payload_size",
            "tenant_id",
        ],
    )
}

/// `e` as a value of the v3 schema, as a dispatcher before v4 wrote it.
fn v3_value(e: &DlqEnvelope) -> Value {
    older_value(e, &["tenant_id"])
}

/// The schema id of a Confluent-framed value.
fn framed_id(bytes: &[u8]) -> u32 {
    assert_eq!(bytes[0], 0, "Confluent framing");
    u32::from_be_bytes(bytes[1..5].try_into().expect("4 bytes of id"))
}

fn field(value: &Value, name: &str) -> Option<Value> {
    let Value::Record(fields) = value else {
        panic!("not a record");
    };
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

fn is_refused(error: &hookline_kafka::Error) -> bool {
    matches!(
        error,
        hookline_kafka::Error::RegistryRefused { status: 409, .. }
    )
}

#[tokio::test]
async fn later_schemas_register_over_v1_under_backward_and_older_records_still_decode() {
    let registry = Registry::new(&registry_settings()).expect("registry");
    let dlq = format!("{}.dlq", unique_name("schema-evolution"));
    let subject = format!("{dlq}-value");
    registry
        .ensure_compatibility(&subject, Compatibility::Backward)
        .await
        .expect("compatibility set");
    let v1_id = registry
        .register(&subject, DLQ_ENVELOPE_V1)
        .await
        .expect("v1 registers");

    // A record parked before the upgrade, framed with v1's id.
    let old = envelope(1);
    let old_bytes = registry
        .encode_value(&dlq, DLQ_ENVELOPE_V1, v1_value(&old))
        .await
        .expect("encode with v1");
    assert_eq!(framed_id(&old_bytes), v1_id);

    let v2_id = registry
        .register(&subject, DLQ_ENVELOPE_V2)
        .await
        .expect("v2 (an optional field with a default) registers under BACKWARD");
    assert_ne!(v2_id, v1_id);
    let v3_id = registry
        .register(&subject, DLQ_ENVELOPE_V3)
        .await
        .expect("v3 (fields with defaults) registers under BACKWARD");
    assert_ne!(v3_id, v2_id);

    // A record parked by a v3 dispatcher, before the tenant was added.
    let v3_writer = Registry::new(&registry_settings()).expect("registry");
    let v3 = envelope(3);
    let v3_bytes = v3_writer
        .encode_value(&dlq, DLQ_ENVELOPE_V3, v3_value(&v3))
        .await
        .expect("encode with v3");
    assert_eq!(framed_id(&v3_bytes), v3_id);

    // A record parked by a v4 dispatcher, before the reasons EXPIRED and CANCELLED.
    let v4_id = registry
        .register(&subject, DLQ_ENVELOPE_V4)
        .await
        .expect("v4 (tenant_id with a default) registers under BACKWARD");
    assert_ne!(v4_id, v3_id);
    let v4_writer = Registry::new(&registry_settings()).expect("registry");
    let v4 = DlqEnvelope {
        tenant_id: Some("acme".into()),
        ..envelope(4)
    };
    let v4_bytes = v4_writer
        .encode_value(&dlq, DLQ_ENVELOPE_V4, v4.to_avro_value())
        .await
        .expect("encode with v4");
    assert_eq!(framed_id(&v4_bytes), v4_id);

    let current_id = registry
        .register(&subject, DLQ_ENVELOPE_CURRENT)
        .await
        .expect("the current schema (v5: two reasons added) registers");
    assert_ne!(current_id, v4_id);
    assert_eq!(
        registry.register(&subject, DLQ_ENVELOPE_CURRENT).await.ok(),
        Some(current_id),
        "registering the current schema again is idempotent"
    );

    // A writer after the upgrade (its own client: the encoder caches one schema per subject)
    // and a reader that starts after it read both records.
    let upgraded = Registry::new(&registry_settings()).expect("registry");
    let new = DlqEnvelope {
        tenant_id: Some("acme".into()),
        error_reason: ErrorReason::Cancelled,
        ..envelope(ENVELOPE_VERSION)
    };
    let new_bytes = upgraded
        .encode_value(&dlq, DLQ_ENVELOPE_CURRENT, new.to_avro_value())
        .await
        .expect("encode with the current schema");
    assert_eq!(framed_id(&new_bytes), current_id);
    let fresh = Registry::new(&registry_settings()).expect("registry");
    let old_value = fresh.decode(&old_bytes).await.expect("v1 record decodes");
    assert_eq!(field(&old_value, "trace_id"), None, "written without it");
    assert_eq!(DlqEnvelope::from_avro_value(old_value).ok(), Some(old));
    let v3_value = fresh.decode(&v3_bytes).await.expect("v3 record decodes");
    assert_eq!(field(&v3_value, "tenant_id"), None, "written without it");
    let v3_read = DlqEnvelope::from_avro_value(v3_value).expect("a v3 envelope");
    assert_eq!(v3_read.tenant_id, None);
    assert_eq!(v3_read, v3);
    let v4_value = fresh.decode(&v4_bytes).await.expect("v4 record decodes");
    assert_eq!(DlqEnvelope::from_avro_value(v4_value).ok(), Some(v4));
    let new_value = fresh
        .decode(&new_bytes)
        .await
        .expect("current record decodes");
    assert_eq!(
        field(&new_value, "trace_id"),
        Some(Value::Union(1, Box::new(Value::String(TRACE_ID.into()))))
    );
    assert_eq!(
        field(&new_value, "tenant_id"),
        Some(Value::Union(1, Box::new(Value::String("acme".into()))))
    );
    assert_eq!(DlqEnvelope::from_avro_value(new_value).ok(), Some(new));

    let refused = registry
        .register(&subject, &incompatible_next())
        .await
        .expect_err("a required field without a default is refused");
    assert!(is_refused(&refused), "{refused}");
}

/// A test dispatcher configuration for `topics`.
fn config(topics: &TestTopics) -> DispatcherConfig {
    let mut config = DispatcherConfig {
        kafka: kafka_settings(),
        registry: registry_settings(),
        group_id: unique_name("dispatchers"),
        ..DispatcherConfig::default()
    };
    config.topics.events = topics.events.clone();
    config.topics.endpoints = topics.endpoints.clone();
    config.topics.retry_tiers = topics.tiers.clone();
    config.retry.cap_ms = 200;
    config.retry.base_ms = 200;
    config.admin.listen = "127.0.0.1:0".to_owned();
    config.shutdown_grace_ms = 5_000;
    config
}

#[tokio::test]
async fn a_dispatcher_over_an_incompatible_dlq_subject_fails_at_start_up() {
    let topics = TestTopics::new("schema-refused", &["200ms"]);
    topics.create(&kafka_settings(), 1).await;
    let subject = format!("{}-value", topics.dlq);
    let registry = Registry::new(&registry_settings()).expect("registry");
    registry
        .register(&subject, FOREIGN)
        .await
        .expect("the registry's global level (NONE) takes anything");

    let settings = config(&topics).into_settings().expect("valid config");
    let error = match start(settings, CancellationToken::new()).await {
        Ok(_) => panic!("the dispatcher started over an incompatible DLQ subject"),
        Err(error) => error,
    };
    let DispatchError::Registry(inner) = &error else {
        panic!("not a registry error: {error}");
    };
    assert!(is_refused(inner), "{error}");
    let message = error.to_string();
    for needle in [
        subject.as_str(),
        "BACKWARD",
        &format!("DLQ envelope schema v{ENVELOPE_VERSION}"),
        "Incompatible",
    ] {
        assert!(message.contains(needle), "{needle:?} not in: {message}");
    }
    assert_eq!(
        registry.compatibility(&subject).await.ok().flatten(),
        Some(Compatibility::Backward),
        "the level was set before the registration"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dispatcher_upgrades_a_v1_dlq_subject_and_parks_current_envelopes() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("schema-upgrade", &["200ms"]);
    topics.create(&kafka, 1).await;
    let subject = format!("{}-value", topics.dlq);
    let registry = Registry::new(&registry_settings()).expect("registry");
    registry
        .ensure_compatibility(&subject, Compatibility::Backward)
        .await
        .expect("compatibility set");
    let v1_id = registry
        .register(&subject, DLQ_ENVELOPE_V1)
        .await
        .expect("v1 registers");

    let shutdown = CancellationToken::new();
    let settings = config(&topics).into_settings().expect("valid config");
    let running = start(settings, shutdown.clone())
        .await
        .expect("the current schema registers over v1: the dispatcher starts");

    // An event for an endpoint nobody configured is parked at once.
    let event = WebhookEvent {
        event_id: unique_name("evt"),
        event_type: "invoice.paid".to_owned(),
        endpoint_id: Some("nobody".to_owned()),
        tenant_id: None,
        channels: Vec::new(),
        endpoint_url: None,
        payload: br#"{"invoice":7}"#.to_vec(),
        content_type: "application/json".to_owned(),
        headers: BTreeMap::new(),
        created_at_ms: 1_700_000_000_000,
        expires_at_ms: None,
    };
    let producer: FutureProducer = kafka.producer_config().create().expect("producer");
    producer
        .send(
            FutureRecord::to(&topics.events)
                .key("nobody")
                .payload(&event.to_json())
                .headers(OwnedHeaders::new().insert(Header {
                    key: "traceparent",
                    value: Some(TRACEPARENT),
                })),
            DEADLINE,
        )
        .await
        .expect("event written");

    let records = read_all(&kafka, &topics.dlq, 1, DEADLINE).await;
    let bytes = records[0].payload().expect("a DLQ value");
    let current_id = registry
        .register(&subject, DLQ_ENVELOPE_CURRENT)
        .await
        .expect("the current schema is there");
    assert_ne!(current_id, v1_id);
    assert_eq!(
        framed_id(bytes),
        current_id,
        "written with the current schema"
    );
    let value = registry.decode(bytes).await.expect("decodes");
    assert_eq!(
        field(&value, "trace_id"),
        Some(Value::Union(1, Box::new(Value::String(TRACE_ID.into()))))
    );
    let parked = DlqEnvelope::from_avro_value(value).expect("an envelope");
    assert_eq!(parked.envelope_version, ENVELOPE_VERSION);
    assert_eq!(parked.event_id, event.event_id);
    assert_eq!(parked.error_reason, ErrorReason::UnknownEndpoint);
    assert_eq!(parked.trace_id(), Some(TRACE_ID));

    shutdown.cancel();
    running.wait().await.expect("clean stop");
}
