//! The writer of retry copies and DLQ envelopes: one write loop, which waits out a broker
//! that is down (backing off) and returns at once on a write that can never succeed.

use std::time::Duration;

use hookline_core::headers::{DeliveryMeta, is_delivery_header};
use hookline_core::pause::Pauses;
use hookline_kafka::FutureProducer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::FutureRecord;

use crate::record::SourceRecord;

/// The outcome could not be made durable before the dispatcher had to stop (or the
/// partition went to another consumer); the source offset stays uncommitted and the record
/// is delivered again by whoever consumes it next.
#[derive(Debug, thiserror::Error)]
#[error("stopped before the outcome was durable")]
pub struct Abandoned;

/// Writes retry copies and DLQ envelopes.
pub(crate) struct Writer {
    producer: FutureProducer,
    pub(super) dlq_topic: String,
    /// The id the registry gave the DLQ envelope schema at start-up: parking frames with it
    /// and needs no registry call.
    pub(super) dlq_schema_id: u32,
    /// The producer's `message.max.bytes`.
    pub(super) max_message_bytes: usize,
}

/// The first and the longest wait of a write loop.
pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(200);
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(10);

impl Writer {
    pub fn new(
        producer: FutureProducer,
        dlq_topic: String,
        dlq_schema_id: u32,
        max_message_bytes: usize,
    ) -> Self {
        Writer {
            producer,
            dlq_topic,
            dlq_schema_id,
            max_message_bytes,
        }
    }

    /// Writes `record`'s key and value unchanged to `topic`, with `meta` as its headers.
    pub(super) async fn copy(
        &self,
        record: &SourceRecord,
        meta: &DeliveryMeta,
        topic: &str,
    ) -> Result<(), KafkaError> {
        let headers = carried_headers(record, meta);
        let (key, value) = (record.key.as_deref(), record.value.as_deref());
        self.produce(topic, key, value, &headers).await.map(|_| ())
    }

    /// The one write loop: waits out a broker that is down (backing off), returns at once
    /// on a permanent error (the error it returns). Returns where the record was written
    /// (partition, offset). A cancelled delivery is dropped by its task wherever it waits,
    /// this loop included (`poll::Spawn::run`).
    pub(super) async fn produce(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(String, Vec<u8>)],
    ) -> Result<(i32, i64), KafkaError> {
        let mut pauses = Pauses::new(FIRST_BACKOFF, MAX_BACKOFF);
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
            let error = match self.producer.send(record, Duration::from_secs(30)).await {
                Ok(written) => return Ok((written.partition, written.offset)),
                Err((error, _)) => error,
            };
            if is_permanent(&error) {
                tracing::warn!(%error, topic, "a write that can never succeed");
                return Err(error);
            }
            tracing::warn!(%error, topic, "writing a record failed; retrying");
            tokio::time::sleep(pauses.next_pause()).await;
        }
    }
}

/// Whether a produce error can never succeed for this record as it is.
fn is_permanent(error: &KafkaError) -> bool {
    let KafkaError::MessageProduction(code) = error else {
        return false;
    };
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::MessageBatchTooLarge
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::BadMessage
            | RDKafkaErrorCode::PolicyViolation
    )
}

/// hookline's delivery headers of `meta` alone.
pub(super) fn meta_headers(meta: &DeliveryMeta) -> Vec<(String, Vec<u8>)> {
    meta.to_headers()
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
}

/// The original record's headers without hookline's delivery headers, then `meta`'s.
pub(super) fn carried_headers(
    record: &SourceRecord,
    meta: &DeliveryMeta,
) -> Vec<(String, Vec<u8>)> {
    let mut headers: Vec<(String, Vec<u8>)> = record
        .headers
        .iter()
        .filter(|(name, _)| !is_delivery_header(name))
        .map(|(name, value)| (name.clone(), value.clone().unwrap_or_default()))
        .collect();
    headers.extend(meta_headers(meta));
    headers
}
