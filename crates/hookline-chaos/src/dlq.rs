//! The DLQ, read as an operator's tool reads it: every envelope decoded through the
//! registry (`Registry::decode`, then `DlqEnvelope::from_avro_value`), followed from the
//! beginning while the scenario runs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context as _;
use hookline_core::envelope::{DlqEnvelope, ErrorReason};
use hookline_kafka::{KafkaSettings, Registry};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Serialize, Serializer};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;

/// One parked record.
#[derive(Clone, Debug, Serialize)]
pub struct Parked {
    /// The envelope's event id (derived from topic, partition and offset when the record
    /// could not be read).
    pub event_id: String,
    /// The original record's key, as text.
    pub key: Option<String>,
    /// Why it was parked.
    #[serde(serialize_with = "reason_code")]
    pub reason: ErrorReason,
    /// When it was parked (the envelope's `error_timestamp_ms`), on the scenario's clock.
    pub at: f64,
    /// Attempts made.
    pub attempts: u32,
    /// The envelope's error message.
    pub message: String,
    /// Where the original record was.
    pub original: String,
}

fn reason_code<S: Serializer>(reason: &ErrorReason, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(reason.code())
}

/// Follows a DLQ topic. Stopped when dropped.
pub struct DlqTail {
    parked: Arc<Mutex<Vec<Parked>>>,
    undecodable: Arc<AtomicU64>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Drop for DlqTail {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn lock(parked: &Mutex<Vec<Parked>>) -> MutexGuard<'_, Vec<Parked>> {
    parked
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl DlqTail {
    /// Reads `topic` (all its partitions) from the beginning, decoding through `registry`.
    pub fn start(
        kafka: &KafkaSettings,
        registry: Arc<Registry>,
        topic: &str,
        clock: Clock,
    ) -> anyhow::Result<DlqTail> {
        let mut config = kafka.client_config();
        config
            .set("group.id", hookline_testkit::unique_name("chaos-dlq"))
            .set("enable.auto.commit", "false");
        let consumer: StreamConsumer = config.create().context("creating the DLQ reader")?;
        let metadata = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(30))
            .context("the DLQ topic's metadata")?;
        let mut assignment = TopicPartitionList::new();
        for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
            assignment
                .add_partition_offset(topic, partition.id(), Offset::Beginning)
                .context("assigning the DLQ")?;
        }
        consumer.assign(&assignment).context("assigning the DLQ")?;
        let parked = Arc::new(Mutex::new(Vec::new()));
        let undecodable = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let task = tokio::spawn(follow(
            consumer,
            registry,
            clock,
            Arc::clone(&parked),
            Arc::clone(&undecodable),
            stop.clone(),
        ));
        Ok(DlqTail {
            parked,
            undecodable,
            stop,
            task: Some(task),
        })
    }

    /// What was parked so far.
    pub fn parked(&self) -> Vec<Parked> {
        lock(&self.parked).clone()
    }

    /// Records that did not decode as envelopes through the registry.
    pub fn undecodable(&self) -> u64 {
        self.undecodable.load(Ordering::Relaxed)
    }

    /// Stops following.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

async fn follow(
    consumer: StreamConsumer,
    registry: Arc<Registry>,
    clock: Clock,
    parked: Arc<Mutex<Vec<Parked>>>,
    undecodable: Arc<AtomicU64>,
    stop: CancellationToken,
) {
    loop {
        let message = tokio::select! {
            () = stop.cancelled() => return,
            message = consumer.recv() => message,
        };
        let message = match message {
            Ok(message) => message,
            Err(error) => {
                // A broker restart: the consumer reconnects by itself.
                tracing::debug!(%error, "reading the DLQ");
                continue;
            }
        };
        let original = format!("{}/{}", message.partition(), message.offset());
        let key = message
            .key()
            .map(|key| String::from_utf8_lossy(key).into_owned());
        let Some(bytes) = message.payload() else {
            undecodable.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        // The registry may be restarting with the broker: wait for it, it must decode.
        let mut envelope = None;
        for _ in 0..60 {
            match registry.decode(bytes).await {
                Ok(value) => {
                    envelope = DlqEnvelope::from_avro_value(value).ok();
                    break;
                }
                Err(error) if error.is_transient() => {
                    tracing::debug!(%error, "the registry cannot decode a DLQ record yet");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(error) => {
                    tracing::warn!(%error, at = %original, "a DLQ record does not decode");
                    break;
                }
            }
        }
        let Some(envelope) = envelope else {
            undecodable.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        lock(&parked).push(Parked {
            event_id: envelope.event_id,
            key: envelope
                .original_key
                .map(|key| String::from_utf8_lossy(&key).into_owned())
                .or(key),
            reason: envelope.error_reason,
            at: clock.since_start_of_epoch_ms(envelope.error_timestamp_ms),
            attempts: envelope.attempts,
            message: envelope.error_message,
            original: format!(
                "{}/{}/{}",
                envelope.original_topic, envelope.original_partition, envelope.original_offset
            ),
        });
    }
}
