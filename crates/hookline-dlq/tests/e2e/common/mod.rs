//! Shared set-up of the DLQ end-to-end tests: a test's own DLQ and actions topics, and
//! envelopes written to them framed through the registry, as the dispatcher writes them.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use hookline_core::envelope::{DlqEnvelope, DlqHeader, ENVELOPE_VERSION, ErrorReason};
use hookline_core::schema::dlq_envelope_schema;
use hookline_dlq::filter::now_ms;
use hookline_dlq::{
    FilterSpec, ReadOptions, RecordRef, Selected, SelectedItem, Selection, Sources,
};
use hookline_kafka::{KafkaSettings, Registry, TopicSpec, ensure_topics};
use hookline_testkit::{kafka_settings, registry_settings, unique_name};
use rdkafka::producer::{FutureProducer, FutureRecord};

pub const DEADLINE: Duration = Duration::from_secs(30);
pub const HOUR: i64 = 3_600_000;

pub struct Dlq {
    pub kafka: KafkaSettings,
    pub registry: Arc<Registry>,
    /// The events topic the DLQ belongs to (not created: a redrive test creates it).
    pub events: String,
    pub dlq: String,
    pub actions: String,
    pub producer: FutureProducer,
}

impl Dlq {
    /// A DLQ topic with two partitions and its compacted actions topic.
    pub async fn new(test: &str) -> Dlq {
        let kafka = kafka_settings();
        let events = unique_name(test);
        let dlq = format!("{events}.dlq");
        let actions = format!("{events}.dlq-actions");
        ensure_topics(
            &kafka,
            &[
                TopicSpec::new(&dlq, 2, 1),
                TopicSpec::new(&actions, 1, 1).config("cleanup.policy", "compact"),
            ],
        )
        .await
        .expect("topics");
        Dlq {
            registry: Arc::new(Registry::new(&registry_settings()).expect("registry")),
            producer: kafka.producer_config().create().expect("producer"),
            kafka,
            events,
            dlq,
            actions,
        }
    }

    pub fn sources(&self) -> Sources<'_> {
        Sources {
            kafka: &self.kafka,
            registry: Arc::clone(&self.registry),
            dlq_topic: self.dlq.clone(),
            actions_topic: self.actions.clone(),
        }
    }

    /// Writes `envelope` framed through the registry to `partition`; returns its place.
    pub async fn park(&self, partition: i32, envelope: &DlqEnvelope) -> RecordRef {
        let bytes = self
            .registry
            .encode_value(&self.dlq, &envelope_schema(), envelope.to_avro_value())
            .await
            .expect("encode");
        self.raw(partition, &bytes).await
    }

    pub async fn raw(&self, partition: i32, bytes: &[u8]) -> RecordRef {
        let record = FutureRecord::<str, [u8]>::to(&self.dlq)
            .partition(partition)
            .key("ep")
            .payload(bytes);
        let delivered = self.producer.send(record, DEADLINE).await.expect("sent");
        RecordRef {
            partition: delivered.partition,
            offset: delivered.offset,
        }
    }

    /// The places `spec` selects (handled records too when `all`), in read order per
    /// partition, undecodable ones included.
    pub async fn select(&self, spec: FilterSpec, all: bool) -> Vec<RecordRef> {
        let filter = spec.build(now_ms()).expect("valid filter");
        let mut selection = Selection::open(self.sources(), filter, ReadOptions::default(), all)
            .await
            .expect("open");
        let mut places = Vec::new();
        while let Some(item) = selection.next().await.expect("read") {
            places.push(match item {
                SelectedItem::Record(s) => s.record.place(),
                SelectedItem::Undecodable(u) => RecordRef {
                    partition: u.partition,
                    offset: u.offset,
                },
            });
        }
        places.sort();
        places
    }

    pub async fn selected(&self, all: bool) -> Vec<Selected> {
        let filter = FilterSpec::default().build(now_ms()).expect("valid");
        let mut selection = Selection::open(self.sources(), filter, ReadOptions::default(), all)
            .await
            .expect("open");
        let mut out = Vec::new();
        while let Some(item) = selection.next().await.expect("read") {
            if let SelectedItem::Record(s) = item {
                out.push(*s);
            }
        }
        out
    }
}

pub fn envelope(endpoint: &str, event_type: &str, reason: ErrorReason, at_ms: i64) -> DlqEnvelope {
    DlqEnvelope {
        envelope_version: ENVELOPE_VERSION,
        event_id: unique_name("evt"),
        event_type: Some(event_type.into()),
        endpoint_id: Some(endpoint.into()),
        endpoint_url: Some("http://127.0.0.1:9/hook".into()),
        original_topic: "webhook-events".into(),
        original_partition: 0,
        original_offset: 1,
        original_key: Some(endpoint.as_bytes().to_vec()),
        original_payload_bytes: format!(r#"{{"endpoint":"{endpoint}"}}"#).into_bytes(),
        original_headers: vec![DlqHeader {
            key: "traceparent".into(),
            value: Some(b"00-1-2-01".to_vec()),
        }],
        error_reason: reason,
        error_message: "HTTP 503".into(),
        last_status_code: Some(503),
        attempts: 3,
        first_attempt_at_ms: Some(at_ms - 1_000),
        error_timestamp_ms: at_ms,
        dispatcher_id: "test".into(),
        original_payload_truncated: false,
        original_payload_size: None,
        tenant_id: None,
    }
}

pub fn spec() -> FilterSpec {
    FilterSpec::default()
}

/// The envelope schema hookline writes, as JSON (what `to_avro_value` follows).
pub fn envelope_schema() -> String {
    serde_json::to_string(dlq_envelope_schema()).expect("a schema serializes")
}
