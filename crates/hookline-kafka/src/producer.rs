//! The producer every hookline component writes with: rdkafka's `FutureProducer` API (a
//! future per record) over a `BaseProducer` whose delivery reports are served by a thread of
//! our own that blocks for a second at a time. A writer that waits on no record (the attempt
//! log) takes the same producer with a context of its own ([`PolledProducer::with_context`]),
//! which sees each report on that thread: no future, no wake-up per record.
//!
//! Why not `FutureProducer` itself: its thread polls in 100 ms slices, and rdkafka 0.39's
//! poll loop hands librdkafka the time left truncated to whole milliseconds, then polls
//! with a zero timeout until its deadline, spinning for the last fraction of a millisecond
//! of every slice: 0.7-0.9% of a core per producer while idle (measured per thread on an
//! idle dispatcher), most of its idle CPU. A one-second slice spins for a thousandth of the
//! time. Delivery reports still wake the thread at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use rdkafka::client::Client;
use rdkafka::config::{FromClientConfig, FromClientConfigAndContext};
use rdkafka::consumer::ConsumerGroupMetadata;
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message, OwnedMessage, ToBytes};
use rdkafka::producer::future_producer::{Delivery, OwnedDeliveryResult};
use rdkafka::producer::{
    BaseProducer, BaseRecord, FutureRecord, Producer, ProducerContext, PurgeConfig,
};
use rdkafka::util::Timeout;
use rdkafka::{ClientConfig, ClientContext, Timestamp, TopicPartitionList};

/// How long the thread that serves delivery reports blocks at a time; it also bounds how
/// long the thread outlives the last handle.
const POLL_SLICE: Duration = Duration::from_secs(1);

/// How long `send` waits before trying a full queue again.
const QUEUE_FULL_BACKOFF: Duration = Duration::from_millis(100);

/// Completes each record's future with its delivery report.
pub struct FutureContext;

impl ClientContext for FutureContext {}

impl ProducerContext for FutureContext {
    type DeliveryOpaque = Box<oneshot::Sender<OwnedDeliveryResult>>;

    fn delivery(&self, result: &DeliveryResult<'_>, tx: Self::DeliveryOpaque) {
        let owned = match result {
            Ok(message) => Ok(Delivery {
                partition: message.partition(),
                offset: message.offset(),
                timestamp: message.timestamp(),
            }),
            Err((error, message)) => Err((error.clone(), message.detach())),
        };
        // The caller may have stopped waiting for it.
        let _ = tx.send(owned);
    }
}

/// A record's delivery report: `Err(Canceled)` when the producer went away first.
pub type DeliveryFuture = oneshot::Receiver<OwnedDeliveryResult>;

/// A Kafka producer whose delivery reports a thread of its own serves, each to `C`. Cheap to
/// clone; the last clone dropped stops its polling thread, which then closes the client
/// (purging what was not sent).
pub struct PolledProducer<C: ProducerContext + 'static> {
    inner: Arc<Inner<C>>,
}

impl<C: ProducerContext + 'static> Clone for PolledProducer<C> {
    fn clone(&self) -> Self {
        PolledProducer {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// A record the producer did not take, with why.
pub type Refused<'a, K, P, C> = (
    KafkaError,
    BaseRecord<'a, K, P, <C as ProducerContext>::DeliveryOpaque>,
);

/// A Kafka producer with a future per record.
pub type FutureProducer = PolledProducer<FutureContext>;

struct Inner<C: ProducerContext + 'static> {
    base: Arc<BaseProducer<C>>,
    stop: Arc<AtomicBool>,
}

impl<C: ProducerContext + 'static> Drop for Inner<C> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

impl FromClientConfig for FutureProducer {
    fn from_config(config: &ClientConfig) -> KafkaResult<Self> {
        PolledProducer::with_context(config, FutureContext)
    }
}

impl<C: ProducerContext + 'static> PolledProducer<C> {
    /// A producer from `config` whose delivery reports go to `context`.
    pub fn with_context(config: &ClientConfig, context: C) -> KafkaResult<Self> {
        let base = Arc::new(BaseProducer::from_config_and_context(config, context)?);
        let stop = Arc::new(AtomicBool::new(false));
        let (polled, stopped) = (Arc::clone(&base), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("rdk:deliveries".to_owned())
            .spawn(move || {
                while !stopped.load(Ordering::Acquire) {
                    polled.poll(POLL_SLICE);
                }
            })
            .map_err(|error| {
                tracing::error!(%error, "starting a producer's polling thread");
                KafkaError::ClientCreation(format!("starting the polling thread: {error}"))
            })?;
        Ok(PolledProducer {
            inner: Arc::new(Inner { base, stop }),
        })
    }

    /// Hands `record` to the producer, or gives it back with the error (a full queue among
    /// them) at once; its delivery report goes to the context with `record.delivery_opaque`.
    #[allow(clippy::result_large_err)]
    pub fn send_base<'a, K, P>(
        &self,
        record: BaseRecord<'a, K, P, C::DeliveryOpaque>,
    ) -> Result<(), Refused<'a, K, P, C>>
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        self.inner.base.send(record)
    }
}

impl FutureProducer {
    /// Hands `record` to the producer, trying again while its queue is full for up to
    /// `queue_timeout`, then waits for its delivery report.
    pub async fn send<K, P>(
        &self,
        record: FutureRecord<'_, K, P>,
        queue_timeout: impl Into<Timeout>,
    ) -> OwnedDeliveryResult
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        let started = Instant::now();
        let queue_timeout = queue_timeout.into();
        let topic = record.topic;
        let mut record = record;
        loop {
            match self.send_result(record) {
                Ok(delivery) => {
                    // A report is always sent while the client lives, and `self` keeps it
                    // alive: a cancelled one cannot happen, but is an error, not a panic.
                    return match delivery.await {
                        Ok(report) => report,
                        Err(oneshot::Canceled) => {
                            let none = Timestamp::NotAvailable;
                            let message =
                                OwnedMessage::new(None, None, topic.to_owned(), none, -1, -1, None);
                            Err((KafkaError::Canceled, message))
                        }
                    };
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back))
                    if may_wait(queue_timeout, started) =>
                {
                    record = back;
                    tokio::time::sleep(QUEUE_FULL_BACKOFF).await;
                }
                Err((error, back)) => return Err((error, owned(back))),
            }
        }
    }

    /// Hands `record` to the producer, or gives it back with the error (a full queue
    /// among them) at once.
    #[allow(clippy::result_large_err)]
    pub fn send_result<'a, K, P>(
        &self,
        record: FutureRecord<'a, K, P>,
    ) -> Result<DeliveryFuture, (KafkaError, FutureRecord<'a, K, P>)>
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        let (tx, rx) = oneshot::channel();
        let base = BaseRecord {
            topic: record.topic,
            partition: record.partition,
            payload: record.payload,
            key: record.key,
            timestamp: record.timestamp,
            headers: record.headers,
            delivery_opaque: Box::new(tx),
        };
        self.send_base(base).map(|()| rx).map_err(|(error, back)| {
            let record = FutureRecord {
                topic: back.topic,
                partition: back.partition,
                payload: back.payload,
                key: back.key,
                timestamp: back.timestamp,
                headers: back.headers,
            };
            (error, record)
        })
    }
}

fn may_wait(queue_timeout: Timeout, started: Instant) -> bool {
    match queue_timeout {
        Timeout::Never => true,
        Timeout::After(limit) => started.elapsed() < limit,
    }
}

/// The record as an owned message, for an error report.
fn owned<K, P>(record: FutureRecord<'_, K, P>) -> OwnedMessage
where
    K: ToBytes + ?Sized,
    P: ToBytes + ?Sized,
{
    OwnedMessage::new(
        record.payload.map(|payload| payload.to_bytes().to_vec()),
        record.key.map(|key| key.to_bytes().to_vec()),
        record.topic.to_owned(),
        record
            .timestamp
            .map_or(Timestamp::NotAvailable, Timestamp::CreateTime),
        record.partition.unwrap_or(-1),
        0,
        record.headers,
    )
}

impl<C: ProducerContext + 'static> Producer<C> for PolledProducer<C> {
    fn client(&self) -> &Client<C> {
        self.inner.base.client()
    }

    fn in_flight_count(&self) -> i32 {
        self.inner.base.in_flight_count()
    }

    fn flush<T: Into<Timeout>>(&self, timeout: T) -> KafkaResult<()> {
        self.inner.base.flush(timeout)
    }

    fn purge(&self, flags: PurgeConfig) {
        self.inner.base.purge(flags)
    }

    fn init_transactions<T: Into<Timeout>>(&self, timeout: T) -> KafkaResult<()> {
        self.inner.base.init_transactions(timeout)
    }

    fn begin_transaction(&self) -> KafkaResult<()> {
        self.inner.base.begin_transaction()
    }

    fn send_offsets_to_transaction<T: Into<Timeout>>(
        &self,
        offsets: &TopicPartitionList,
        cgm: &ConsumerGroupMetadata,
        timeout: T,
    ) -> KafkaResult<()> {
        self.inner
            .base
            .send_offsets_to_transaction(offsets, cgm, timeout)
    }

    fn commit_transaction<T: Into<Timeout>>(&self, timeout: T) -> KafkaResult<()> {
        self.inner.base.commit_transaction(timeout)
    }

    fn abort_transaction<T: Into<Timeout>>(&self, timeout: T) -> KafkaResult<()> {
        self.inner.base.abort_transaction(timeout)
    }
}
