//! The publisher: encodes prepared events and sends them with an idempotent producer.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{StreamExt, stream};
use hookline_core::WebhookEvent;
use hookline_core::schema::WEBHOOK_EVENT_CURRENT;
use hookline_core::signing::WEBHOOK_ID;
use hookline_kafka::FutureProducer;
use hookline_kafka::{KafkaSettings, Registry};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureRecord, Producer};
use tracing::Span;

use super::prepare::prepare;
use super::{Encoding, PublishError, PublisherConfig};

/// Where Kafka stored a published event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivered {
    /// The event's id (generated if the event had none).
    pub event_id: String,
    /// The partition of the record.
    pub partition: i32,
    /// The offset of the record.
    pub offset: i64,
}

/// Publishes webhook events: deliveries to the events topic, keyed by endpoint id, and
/// tenant events to its fan-out topic (`<topic>.fanout`), keyed by tenant id. Cheap to share by reference; `publish` takes
/// `&self` and may be called concurrently.
pub struct Publisher {
    producer: FutureProducer,
    registry: Option<Arc<Registry>>,
    topic: String,
    fanout_topic: String,
    encoding: Encoding,
    max_payload_bytes: usize,
    queue_timeout: Duration,
}

impl fmt::Debug for Publisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Publisher")
            .field("topic", &self.topic)
            .field("encoding", &self.encoding)
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl Publisher {
    /// A publisher with an idempotent, `acks=all` producer. Avro needs `registry`.
    pub fn new(
        kafka: &KafkaSettings,
        registry: Option<Arc<Registry>>,
        config: PublisherConfig,
    ) -> Result<Self, PublishError> {
        if config.encoding == Encoding::Avro && registry.is_none() {
            return Err(PublishError::RegistryRequired);
        }
        let producer = kafka
            .producer_config()
            .create()
            .map_err(PublishError::Client)?;
        Ok(Publisher {
            producer,
            registry,
            fanout_topic: crate::Topics::new(config.topic.as_str(), "").fanout(),
            topic: config.topic,
            encoding: config.encoding,
            max_payload_bytes: config.max_payload_bytes,
            queue_timeout: Duration::from_millis(config.queue_timeout_ms),
        })
    }

    /// The topic this publisher writes deliveries to.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The topic this publisher writes tenant events to.
    pub fn fanout_topic(&self) -> &str {
        &self.fanout_topic
    }

    /// How it encodes values.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Publishes one event with the `webhook-id` header: a delivery (the event names an
    /// endpoint) to the events topic keyed by its endpoint id, a tenant event to the fan-out
    /// topic keyed by its tenant id. An empty `event_id` becomes a new UUID v7 and a zero
    /// `created_at_ms` the current time.
    /// The event is validated first: an invalid one is refused before anything is sent.
    /// Returns once Kafka has acknowledged the record.
    #[tracing::instrument(skip_all, fields(event_id, endpoint = ?event.endpoint_id, tenant = ?event.tenant_id))]
    pub async fn publish(&self, event: &WebhookEvent) -> Result<Delivered, PublishError> {
        let event = prepare(event, self.max_payload_bytes, now_ms(), new_event_id)?;
        Span::current().record("event_id", event.event_id.as_str());
        // `prepare` validated that the event names an endpoint or a tenant.
        let (topic, key) = match (&event.endpoint_id, &event.tenant_id) {
            (Some(endpoint), _) => (&self.topic, endpoint.as_str()),
            (None, tenant) => (&self.fanout_topic, tenant.as_deref().unwrap_or_default()),
        };
        let value = self.encode(topic, &event).await?;
        let headers = OwnedHeaders::new().insert(Header {
            key: WEBHOOK_ID,
            value: Some(event.event_id.as_bytes()),
        });
        let record = FutureRecord::to(topic)
            .key(key.as_bytes())
            .payload(&value)
            .headers(headers);
        match self.producer.send(record, self.queue_timeout).await {
            Ok(delivery) => {
                tracing::debug!(
                    partition = delivery.partition,
                    offset = delivery.offset,
                    "event published"
                );
                Ok(Delivered {
                    event_id: event.event_id,
                    partition: delivery.partition,
                    offset: delivery.offset,
                })
            }
            Err((source, _)) => Err(PublishError::Send {
                event_id: event.event_id,
                source,
            }),
        }
    }

    /// Publishes `events` with at most `concurrency` in flight (at least one); the results
    /// are in the order of `events`. Events sent concurrently may be stored out of order,
    /// also within an endpoint: use a concurrency of 1 where order matters.
    pub async fn publish_many(
        &self,
        events: &[WebhookEvent],
        concurrency: usize,
    ) -> Vec<Result<Delivered, PublishError>> {
        stream::iter(events)
            .map(|event| self.publish(event))
            .buffered(concurrency.max(1))
            .collect()
            .await
    }

    /// Waits until every record handed to the producer is acknowledged, or `timeout`.
    pub async fn flush(&self, timeout: Duration) -> Result<(), PublishError> {
        let producer = self.producer.clone();
        // librdkafka's flush blocks the calling thread.
        match tokio::task::spawn_blocking(move || producer.flush(timeout)).await {
            Ok(result) => result.map_err(PublishError::Flush),
            Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
            Err(_) => Err(PublishError::Flush(KafkaError::Canceled)),
        }
    }

    async fn encode(&self, topic: &str, event: &WebhookEvent) -> Result<Vec<u8>, PublishError> {
        match self.encoding {
            Encoding::Json => Ok(event.to_json()),
            Encoding::Avro => {
                let registry = self
                    .registry
                    .as_ref()
                    .ok_or(PublishError::RegistryRequired)?;
                registry
                    .encode_value(topic, WEBHOOK_EVENT_CURRENT, event.to_avro_value())
                    .await
                    .map_err(|source| PublishError::Encode {
                        event_id: event.event_id.clone(),
                        source: Box::new(source),
                    })
            }
        }
    }
}

fn new_event_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
