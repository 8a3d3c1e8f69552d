//! Making an outcome durable: a retry record in a tier topic or an envelope in the DLQ,
//! acknowledged by Kafka (idempotent producer, acks=all) before the source offset may be
//! stored. A broker or registry that is down is waited for; nothing is dropped.

use std::sync::Arc;
use std::time::Duration;

use hookline_core::envelope::DlqEnvelope;
use hookline_core::headers::{DeliveryMeta, is_delivery_header};
use hookline_core::schema::DLQ_ENVELOPE_CURRENT;
use hookline_kafka::Registry;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio_util::sync::CancellationToken;

use crate::record::SourceRecord;

/// The outcome could not be made durable before the dispatcher had to stop; the source
/// offset stays uncommitted and the record is delivered again by whoever consumes it next.
#[derive(Debug, thiserror::Error)]
#[error("stopped before the outcome was durable")]
pub struct Abandoned;

/// Writes retry and DLQ records.
#[derive(Clone)]
pub struct Router {
    producer: FutureProducer,
    registry: Arc<Registry>,
    dlq_topic: String,
    abandon: CancellationToken,
}

const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

impl Router {
    /// A router producing with `producer`; `abandon` ends its waiting for a broken broker or
    /// registry (at the end of the shutdown grace period).
    pub fn new(
        producer: FutureProducer,
        registry: Arc<Registry>,
        dlq_topic: String,
        abandon: CancellationToken,
    ) -> Self {
        Router {
            producer,
            registry,
            dlq_topic,
            abandon,
        }
    }

    /// Writes `record`'s key and value unchanged to `tier_topic`, with `meta` as its headers.
    pub async fn schedule_retry(
        &self,
        record: &SourceRecord,
        meta: &DeliveryMeta,
        tier_topic: &str,
    ) -> Result<(), Abandoned> {
        let headers = carried_headers(record, meta);
        self.produce(
            tier_topic,
            record.key.as_deref(),
            record.value.as_deref(),
            &headers,
        )
        .await
    }

    /// Encodes `envelope` through the registry and writes it to the DLQ, keyed like the
    /// original record, with `meta` as headers.
    pub async fn park(
        &self,
        record: &SourceRecord,
        meta: &DeliveryMeta,
        envelope: DlqEnvelope,
    ) -> Result<(), Abandoned> {
        let headers = carried_headers(record, meta);
        let value = envelope.to_avro_value();
        let mut backoff = FIRST_BACKOFF;
        let bytes = loop {
            match self
                .registry
                .encode_value(&self.dlq_topic, DLQ_ENVELOPE_CURRENT, value.clone())
                .await
            {
                Ok(bytes) => break bytes,
                Err(error) => {
                    tracing::warn!(%error, "encoding a DLQ envelope failed; retrying");
                    self.pause(&mut backoff).await?;
                }
            }
        };
        self.produce(
            &self.dlq_topic,
            record.key.as_deref(),
            Some(&bytes),
            &headers,
        )
        .await
    }

    async fn produce(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(String, Vec<u8>)],
    ) -> Result<(), Abandoned> {
        let mut backoff = FIRST_BACKOFF;
        loop {
            let mut owned = OwnedHeaders::new_with_capacity(headers.len());
            for (name, bytes) in headers {
                owned = owned.insert(Header {
                    key: name,
                    value: Some(bytes),
                });
            }
            let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic).headers(owned);
            if let Some(key) = key {
                record = record.key(key);
            }
            if let Some(value) = value {
                record = record.payload(value);
            }
            let sent = tokio::select! {
                () = self.abandon.cancelled() => return Err(Abandoned),
                sent = self.producer.send(record, Duration::from_secs(30)) => sent,
            };
            match sent {
                Ok(_) => return Ok(()),
                Err((error, _)) => {
                    tracing::warn!(%error, topic, "writing a record failed; retrying");
                    self.pause(&mut backoff).await?;
                }
            }
        }
    }

    async fn pause(&self, backoff: &mut Duration) -> Result<(), Abandoned> {
        tokio::select! {
            () = self.abandon.cancelled() => Err(Abandoned),
            () = tokio::time::sleep(*backoff) => {
                *backoff = (*backoff * 2).min(MAX_BACKOFF);
                Ok(())
            }
        }
    }
}

/// The original record's headers without hookline's own, then hookline's current ones.
fn carried_headers(record: &SourceRecord, meta: &DeliveryMeta) -> Vec<(String, Vec<u8>)> {
    let mut headers: Vec<(String, Vec<u8>)> = record
        .headers
        .iter()
        .filter(|(name, _)| !is_delivery_header(name))
        .map(|(name, value)| (name.clone(), value.clone().unwrap_or_default()))
        .collect();
    headers.extend(
        meta.to_headers()
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value)),
    );
    headers
}
