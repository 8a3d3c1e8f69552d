//! The attempt log's handle (what delivery calls, never waiting) and its writer task.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use hookline_core::attempt_log::{AttemptRecord, excerpt};
use hookline_core::schema::WEBHOOK_ATTEMPT_CURRENT;
use hookline_kafka::FutureProducer;
use hookline_kafka::Registry;
use rdkafka::producer::FutureRecord;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::metrics::{AttemptLogMetrics, Dropped};
use crate::error::{DispatchError, Result};
use crate::settings::Settings;

/// Most records sent and not yet acknowledged at once.
const MAX_IN_FLIGHT: usize = 10_000;
/// How long the writer goes on after shutdown for the last records.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// What delivery hands attempt records to. Cloning is cheap; a disabled log drops nothing
/// and counts nothing.
#[derive(Clone, Debug)]
pub(crate) struct AttemptLog {
    tx: Option<mpsc::Sender<AttemptRecord>>,
    metrics: AttemptLogMetrics,
    dispatcher_id: Arc<str>,
    max_excerpt: usize,
}

impl AttemptLog {
    /// A log that writes nothing.
    pub(crate) fn disabled(dispatcher_id: &str) -> Self {
        AttemptLog {
            tx: None,
            metrics: AttemptLogMetrics::default(),
            dispatcher_id: dispatcher_id.into(),
            max_excerpt: 0,
        }
    }

    /// Whether records are written at all (to skip building them).
    pub(crate) fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// The dispatcher id records carry.
    pub(crate) fn dispatcher_id(&self) -> String {
        self.dispatcher_id.to_string()
    }

    /// The excerpt of `body` records carry.
    pub(crate) fn excerpt(&self, body: &[u8]) -> Option<String> {
        excerpt(body, self.max_excerpt)
    }

    /// Hands `record` to the writer, or drops and counts it when the buffer is full. Never
    /// waits.
    pub(crate) fn push(&self, record: AttemptRecord) {
        let Some(tx) = &self.tx else { return };
        if tx.try_send(record).is_err() {
            self.metrics.dropped(Dropped::BufferFull);
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

/// Starts the writer task (on `tracker`) and returns the handle delivery writes to; a
/// disabled log starts nothing.
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
    // Java client); the log is best effort, so no idempotence to wait on.
    config
        .set("partitioner", "murmur2_random")
        .set("enable.idempotence", "false")
        .set("acks", "1")
        .set("linger.ms", "20")
        .set("queue.buffering.max.messages", attempts.buffer.to_string());
    let producer: FutureProducer = config
        .create()
        .map_err(|source| DispatchError::kafka("creating the attempt-log producer", source))?;
    let (tx, rx) = mpsc::channel(attempts.buffer);
    let task = Task {
        producer,
        topic: attempts.topic.clone(),
        schema_id,
        metrics: metrics.clone(),
    };
    tracker.spawn(task.run(rx, shutdown.clone(), settings.shutdown_grace));
    Ok(AttemptLog {
        tx: Some(tx),
        metrics: metrics.clone(),
        dispatcher_id: settings.dispatcher_id.as_str().into(),
        max_excerpt: attempts.max_body_excerpt_bytes,
    })
}

struct Task {
    producer: FutureProducer,
    topic: String,
    schema_id: u32,
    metrics: AttemptLogMetrics,
}

impl Task {
    /// Writes what arrives until every handle is gone, or until shutdown plus `grace` (the
    /// deliveries that drain after shutdown still log), then waits a little for the last
    /// acknowledgements.
    async fn run(
        self,
        mut rx: mpsc::Receiver<AttemptRecord>,
        shutdown: CancellationToken,
        grace: Duration,
    ) {
        let mut in_flight = FuturesUnordered::new();
        let stop = async {
            shutdown.cancelled().await;
            tokio::time::sleep(grace).await;
        };
        tokio::pin!(stop);
        loop {
            tokio::select! {
                Some(done) = in_flight.next(), if !in_flight.is_empty() => self.count(done),
                record = rx.recv(), if in_flight.len() < MAX_IN_FLIGHT => match record {
                    Some(record) => {
                        if let Some(future) = self.send(&record) {
                            in_flight.push(future);
                        }
                    }
                    None => break,
                },
                () = &mut stop => break,
            }
        }
        let flushed = tokio::time::timeout(FLUSH_TIMEOUT, async {
            while let Some(done) = in_flight.next().await {
                self.count(done);
            }
        })
        .await;
        if flushed.is_err() {
            tracing::warn!("attempt-log records still unacknowledged at shutdown");
        }
    }

    fn send(&self, record: &AttemptRecord) -> Option<hookline_kafka::DeliveryFuture> {
        let value = match record.to_framed_avro(self.schema_id) {
            Ok(value) => value,
            Err(error) => {
                tracing::error!(%error, "an attempt-log record cannot be encoded");
                self.metrics.dropped(Dropped::Encoding);
                return None;
            }
        };
        let kafka_record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&self.topic)
            .key(record.event_id.as_bytes())
            .payload(&value);
        match self.producer.send_result(kafka_record) {
            Ok(future) => Some(future),
            Err((error, _)) => {
                tracing::debug!(%error, "the attempt-log producer refused a record");
                self.metrics.dropped(Dropped::BufferFull);
                None
            }
        }
    }

    fn count(
        &self,
        done: Result<
            rdkafka::producer::future_producer::OwnedDeliveryResult,
            futures::channel::oneshot::Canceled,
        >,
    ) {
        match done {
            Ok(Ok(_)) => self.metrics.written(),
            Ok(Err((error, _))) => {
                tracing::debug!(%error, topic = self.topic, "an attempt-log record was not written");
                self.metrics.dropped(Dropped::WriteFailed);
            }
            Err(_) => self.metrics.dropped(Dropped::WriteFailed),
        }
    }
}
