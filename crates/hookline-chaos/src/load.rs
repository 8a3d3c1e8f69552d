//! Publishing: events sent at a steady rate while the faults happen, as JSON or as Avro
//! through the registry (with a writer schema of the scenario's choosing), each recorded
//! with its partition, the time Kafka acknowledged it and what should become of it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context as _;
use apache_avro::types::Value;
use futures::StreamExt as _;
use hookline_core::WebhookEvent;
use hookline_core::envelope::ErrorReason;
use hookline_kafka::{KafkaSettings, Registry};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde::{Serialize, Serializer};
use tokio::task::JoinHandle;

use crate::clock::Clock;

/// What should become of a published record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Delivered (answered 2xx).
    Deliver,
    /// Parked in the DLQ with this reason.
    Park(ErrorReason),
}

impl Serialize for Expect {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Expect::Deliver => serializer.serialize_str("deliver"),
            Expect::Park(reason) => serializer.serialize_str(&format!("park:{}", reason.code())),
        }
    }
}

/// One published record.
#[derive(Clone, Debug, Serialize)]
pub struct Published {
    /// The event id (`webhook-id`).
    pub id: String,
    /// The endpoint it is for.
    pub endpoint: String,
    /// Its partition of the events topic.
    pub partition: i32,
    /// When Kafka acknowledged it, on the scenario's clock.
    pub at: f64,
    /// What should become of it.
    pub expect: Expect,
    /// A record key of its own, to find its DLQ envelope by when its id cannot be read
    /// (a poison record); `None` for events keyed by their endpoint.
    pub key: Option<String>,
}

/// Everything published in a scenario.
#[derive(Default)]
pub struct Ledger {
    published: Mutex<Vec<Published>>,
}

impl Ledger {
    fn lock(&self) -> MutexGuard<'_, Vec<Published>> {
        self.published
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a published record.
    pub fn push(&self, published: Published) {
        self.lock().push(published);
    }

    /// Everything published so far.
    pub fn all(&self) -> Vec<Published> {
        self.lock().clone()
    }
}

/// How an event's value is written.
#[derive(Clone, Debug)]
pub enum Body {
    /// JSON.
    Json,
    /// Confluent-framed Avro of a writer schema (the v1 schema, or one with extra optional
    /// fields, which get null).
    Avro(AvroSchema),
}

/// A writer schema and the subject it is registered under.
#[derive(Clone, Debug)]
pub struct AvroSchema {
    /// The schema.
    pub schema: Arc<str>,
    /// `None`: `<topic>-value`; else `<topic>.<suffix>-value` (the registry's encoder keeps
    /// one schema per subject, so each variant needs its own; readers go by the id).
    pub subject_suffix: Option<Arc<str>>,
}

/// One event to publish.
#[derive(Clone, Debug)]
pub struct Outgoing {
    /// The event.
    pub event: WebhookEvent,
    /// How it is written.
    pub body: Body,
    /// What should become of it.
    pub expect: Expect,
}

/// Publishes a scenario's events: an idempotent producer that waits out a broker restart.
pub struct Sender {
    producer: FutureProducer,
    registry: Arc<Registry>,
    topic: String,
    partitions: i32,
    clock: Clock,
    ledger: Arc<Ledger>,
}

impl Sender {
    /// A sender to `topic`, spreading events over its `partitions` in turn.
    pub fn new(
        kafka: &KafkaSettings,
        registry: Arc<Registry>,
        topic: &str,
        partitions: i32,
        clock: Clock,
        ledger: Arc<Ledger>,
    ) -> anyhow::Result<Self> {
        let mut config = kafka.producer_config();
        // A broker restart of 20 s and its start-up must not fail a send.
        config.set("message.timeout.ms", "300000");
        let producer = config.create().context("creating the producer")?;
        Ok(Sender {
            producer,
            registry,
            topic: topic.to_owned(),
            partitions,
            clock,
            ledger,
        })
    }

    /// Publishes the `n`-th event (partition `n` modulo the partitions) and records it.
    pub async fn send(&self, n: u64, outgoing: Outgoing) -> anyhow::Result<()> {
        let event = &outgoing.event;
        let value = match &outgoing.body {
            Body::Json => event.to_json(),
            Body::Avro(avro) => self
                .registry
                .encode_value(
                    &avro.subject_suffix.as_ref().map_or_else(
                        || self.topic.clone(),
                        |suffix| format!("{}.{suffix}", self.topic),
                    ),
                    &avro.schema,
                    avro_value(event, &avro.schema)?,
                )
                .await
                .with_context(|| format!("encoding {} through the registry", event.event_id))?,
        };
        let partition = i32::try_from(n % u64::try_from(self.partitions)?)?;
        let headers = OwnedHeaders::new().insert(Header {
            key: "webhook-id",
            value: Some(event.event_id.as_bytes()),
        });
        let record = FutureRecord::to(&self.topic)
            .partition(partition)
            .key(event.endpoint_id.as_deref().unwrap_or_default().as_bytes())
            .payload(&value)
            .headers(headers);
        let delivery = self
            .producer
            .send(record, Duration::from_secs(300))
            .await
            .map_err(|(error, _)| error)
            .with_context(|| format!("publishing {}", event.event_id))?;
        self.ledger.push(Published {
            id: event.event_id.clone(),
            endpoint: event.endpoint_id.clone().unwrap_or_default(),
            partition: delivery.partition,
            at: self.clock.now(),
            expect: outgoing.expect,
            key: None,
        });
        Ok(())
    }
}

/// The event as a value of `schema`: the v1 fields, and null for any extra field.
fn avro_value(event: &WebhookEvent, schema: &str) -> anyhow::Result<Value> {
    let Value::Record(mut fields) = event.to_avro_value() else {
        anyhow::bail!("an event is an Avro record");
    };
    let parsed: serde_json::Value = serde_json::from_str(schema).context("the writer schema")?;
    for field in parsed["fields"].as_array().into_iter().flatten() {
        let Some(name) = field["name"].as_str() else {
            continue;
        };
        if !fields.iter().any(|(known, _)| known == name) {
            fields.push((name.to_owned(), Value::Union(0, Box::new(Value::Null))));
        }
    }
    Ok(Value::Record(fields))
}

/// The current event schema with one extra optional field: a new schema id in the registry.
pub fn schema_variant(extra_field: &str) -> anyhow::Result<String> {
    let mut schema: serde_json::Value =
        serde_json::from_str(hookline_core::schema::WEBHOOK_EVENT_CURRENT)
            .context("the event schema")?;
    let fields = schema["fields"]
        .as_array_mut()
        .context("the event schema has fields")?;
    fields.push(
        serde_json::json!({ "name": extra_field, "type": ["null", "string"], "default": null }),
    );
    Ok(schema.to_string())
}

/// A steady load: `total` events at `rate_per_s`, the `n`-th made by `make(n)`.
pub struct Load {
    /// Events to publish.
    pub total: u64,
    /// Events per second.
    pub rate_per_s: f64,
}

impl Load {
    /// Publishes in the background; the handle yields once everything is acknowledged.
    pub fn spawn<F>(self, sender: Arc<Sender>, make: F) -> JoinHandle<anyhow::Result<()>>
    where
        F: Fn(u64) -> Outgoing + Send + Sync + 'static,
    {
        let started = tokio::time::Instant::now();
        let rate = self.rate_per_s.max(0.001);
        tokio::spawn(async move {
            let make = &make;
            let sender = &sender;
            let sends = futures::stream::iter(0..self.total)
                .then(|n| async move {
                    tokio::time::sleep_until(started + Duration::from_secs_f64(n as f64 / rate))
                        .await;
                    n
                })
                .map(|n| sender.send(n, make(n)))
                .buffer_unordered(1024);
            let mut sends = std::pin::pin!(sends);
            while let Some(result) = sends.next().await {
                result?;
            }
            Ok(())
        })
    }
}

/// A JSON event `n` for `endpoint`, its id unique to the run.
pub fn event(run: &str, endpoint: &str, n: u64) -> WebhookEvent {
    WebhookEvent {
        event_id: format!("{run}-{endpoint}-{n:07}"),
        event_type: "order.created".to_owned(),
        endpoint_id: Some(endpoint.to_owned()),
        tenant_id: None,
        channels: Vec::new(),
        endpoint_url: None,
        payload: format!(r#"{{"order":{n},"amount_cents":4200,"currency":"EUR"}}"#).into_bytes(),
        content_type: "application/json".to_owned(),
        headers: BTreeMap::new(),
        created_at_ms: crate::clock::epoch_ms(),
        expires_at_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use apache_avro::Schema;
    use apache_avro::reader::datum::GenericDatumReader;
    use apache_avro::writer::datum::GenericDatumWriter;

    use super::*;

    #[test]
    fn a_variant_is_a_schema_the_event_fits() {
        let variant = schema_variant("chaos_phase_2").unwrap();
        let schema = Schema::parse_str(&variant).unwrap();
        let event = event("run", "ok", 7);
        let value = avro_value(&event, &variant).unwrap();
        let datum = GenericDatumWriter::builder(&schema)
            .build()
            .unwrap()
            .write_value_to_vec(value)
            .unwrap();
        let decoded = GenericDatumReader::builder(&schema)
            .build()
            .unwrap()
            .read_value(&mut datum.as_slice())
            .unwrap();
        let back = WebhookEvent::from_avro_value(decoded).unwrap();
        assert_eq!(back, event);
        assert_ne!(variant, schema_variant("chaos_phase_3").unwrap());
    }

    #[test]
    fn expectations_serialise_with_reason_codes() {
        let text =
            serde_json::to_string(&[Expect::Deliver, Expect::Park(ErrorReason::MalformedEvent)])
                .unwrap();
        assert_eq!(text, r#"["deliver","park:malformed_event"]"#);
    }
}
