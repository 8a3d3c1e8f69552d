//! The attempt log's handle (what delivery calls, never waiting) and the task that flushes
//! it at shutdown. A record is encoded and handed to the log's producer where it is made;
//! the broker's acknowledgement is counted on the producer's polling thread
//! ([`LogContext`]): no future, channel or wake-up per record.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hookline_core::attempt_log::{AttemptRecord, excerpt};
use hookline_core::schema::WEBHOOK_ATTEMPT_CURRENT;
use hookline_kafka::{PolledProducer, Registry};
use rdkafka::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseRecord, Producer, ProducerContext};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::{DispatchError, Result};
use crate::metrics::{AttemptLogMetrics, Dropped};
use crate::settings::Settings;

/// How long the log waits after shutdown for the last records' acknowledgements, beyond
/// its producer's `linger.ms` ([`flush_timeout`]).
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The shutdown flush's bound for a producer lingering `linger_ms`. librdkafka's flush
/// sends at once what it finds queued for a partition, but records that reach a partition's
/// queue only after the flush began (the first records to a topic whose metadata was still
/// on its way: confluentinc/librdkafka#3633) wait out the linger; a flush that ended first
/// left them to be purged with the producer.
fn flush_timeout(linger_ms: u64) -> Duration {
    FLUSH_TIMEOUT + Duration::from_millis(linger_ms)
}

/// Counts each record's acknowledgement, or its failure.
struct LogContext {
    metrics: AttemptLogMetrics,
    topic: Arc<str>,
}

impl ClientContext for LogContext {}

impl ProducerContext for LogContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, (): ()) {
        match result {
            Ok(_) => self.metrics.written(),
            Err((error, _)) => {
                tracing::debug!(%error, topic = %self.topic, "an attempt-log record was not written");
                self.metrics.dropped(Dropped::WriteFailed);
            }
        }
    }
}

/// Where an enabled log writes.
#[derive(Clone)]
struct Sink {
    producer: PolledProducer<LogContext>,
    topic: Arc<str>,
    schema_id: u32,
    /// Closed once every handle is gone: the flush task's signal.
    _alive: mpsc::Sender<Infallible>,
}

/// What delivery hands attempt records to. Cloning is cheap; a disabled log drops nothing
/// and counts nothing.
#[derive(Clone)]
pub(crate) struct AttemptLog {
    sink: Option<Sink>,
    metrics: AttemptLogMetrics,
    dispatcher_id: Arc<str>,
    max_excerpt: usize,
}

impl std::fmt::Debug for AttemptLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttemptLog")
            .field("topic", &self.sink.as_ref().map(|sink| &sink.topic))
            .finish_non_exhaustive()
    }
}

impl AttemptLog {
    /// A log that writes nothing.
    pub(crate) fn disabled(dispatcher_id: &str) -> Self {
        AttemptLog {
            sink: None,
            metrics: AttemptLogMetrics::default(),
            dispatcher_id: dispatcher_id.into(),
            max_excerpt: 0,
        }
    }

    /// Whether records are written at all (to skip building them).
    pub(crate) fn enabled(&self) -> bool {
        self.sink.is_some()
    }

    /// The dispatcher id records carry.
    pub(crate) fn dispatcher_id(&self) -> String {
        // Not `to_string`: on an `Arc<str>` that goes through the formatter.
        String::from(&*self.dispatcher_id)
    }

    /// The excerpt of `body` records carry.
    pub(crate) fn excerpt(&self, body: &[u8]) -> Option<String> {
        excerpt(body, self.max_excerpt)
    }

    /// Encodes `record` and hands it to the producer, or drops and counts it when the
    /// producer's queue (`attempts.buffer` records) is full. Never waits.
    pub(crate) fn push(&self, record: AttemptRecord) {
        let Some(sink) = &self.sink else { return };
        let value = match record.to_framed_avro(sink.schema_id) {
            Ok(value) => value,
            Err(error) => {
                tracing::error!(%error, "an attempt-log record cannot be encoded");
                self.metrics.dropped(Dropped::Encoding);
                return;
            }
        };
        let kafka_record: BaseRecord<'_, [u8], [u8], ()> =
            BaseRecord::with_opaque_to(&sink.topic, ())
                .key(record.event_id.as_bytes())
                .payload(&value);
        if let Err((error, _)) = sink.producer.send_base(kafka_record) {
            let why = match error {
                KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull) => Dropped::BufferFull,
                _ => Dropped::WriteFailed,
            };
            tracing::debug!(%error, "the attempt-log producer refused a record");
            self.metrics.dropped(why);
        }
    }
}

/// Registers the attempt schema under `<attempts topic>-value` and returns its id.
pub(crate) async fn register_attempt_schema(
    settings: &Settings,
    registry: &Registry,
) -> Result<u32> {
    let subject = format!("{}-value", settings.attempts.topic);
    let id = hookline_kafka::with_patience(
        "the attempt-log schema",
        hookline_kafka::STARTUP_PATIENCE,
        || registry.register(&subject, WEBHOOK_ATTEMPT_CURRENT),
    )
    .await?;
    tracing::info!(subject, schema_id = id, "attempt-log schema registered");
    Ok(id)
}

/// Starts the log's producer and the task that flushes it at shutdown (on `tracker`), and
/// returns the handle delivery writes to; a disabled log starts nothing.
pub(crate) fn start(
    settings: &Settings,
    schema_id: u32,
    metrics: &AttemptLogMetrics,
    tracker: &TaskTracker,
    shutdown: &CancellationToken,
) -> Result<AttemptLog> {
    let attempts = &settings.attempts;
    if !attempts.enabled {
        return Ok(AttemptLog::disabled(&settings.dispatcher_id));
    }
    let mut config = settings.kafka.producer_config();
    // Records of one event share a partition that a reader can compute (murmur2, as the
    // Java client); the log is best effort, so no idempotence to wait on. The producer's
    // queue is the log's buffer.
    config
        .set("partitioner", "murmur2_random")
        .set("enable.idempotence", "false")
        .set("acks", "1")
        .set("linger.ms", attempts.linger_ms.to_string())
        .set("queue.buffering.max.messages", attempts.buffer.to_string());
    let topic: Arc<str> = attempts.topic.as_str().into();
    let context = LogContext {
        metrics: metrics.clone(),
        topic: Arc::clone(&topic),
    };
    let producer = PolledProducer::with_context(&config, context)
        .map_err(|source| DispatchError::kafka("creating the attempt-log producer", source))?;
    let (alive, gone) = mpsc::channel(1);
    tracker.spawn(flush_at_shutdown(
        producer.clone(),
        gone,
        shutdown.clone(),
        settings.shutdown_grace,
        flush_timeout(attempts.linger_ms),
    ));
    Ok(AttemptLog {
        sink: Some(Sink {
            producer,
            topic,
            schema_id,
            _alive: alive,
        }),
        metrics: metrics.clone(),
        dispatcher_id: settings.dispatcher_id.as_str().into(),
        max_excerpt: attempts.max_body_excerpt_bytes,
    })
}

/// Once every handle is gone, or shutdown plus `grace` has passed (the deliveries that
/// drain after shutdown still log), waits up to `flush_timeout` for the last
/// acknowledgements: the producer, once dropped, purges what it still holds.
async fn flush_at_shutdown(
    producer: PolledProducer<LogContext>,
    mut gone: mpsc::Receiver<Infallible>,
    shutdown: CancellationToken,
    grace: Duration,
    flush_timeout: Duration,
) {
    let stop = async {
        shutdown.cancelled().await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        None = gone.recv() => {}
        () = stop => {}
    }
    let flushed = tokio::task::spawn_blocking(move || producer.flush(flush_timeout)).await;
    if !matches!(flushed, Ok(Ok(()))) {
        tracing::warn!("attempt-log records still unacknowledged at shutdown");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shutdown_flush_outlasts_the_linger() {
        for linger_ms in [0, 20, 10_000] {
            assert!(flush_timeout(linger_ms) >= Duration::from_millis(linger_ms) + FLUSH_TIMEOUT);
        }
    }
}
