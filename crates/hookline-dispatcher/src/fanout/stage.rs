//! The fan-out loop: take a batch of tenant events, wait until the endpoint table holds every
//! endpoint change written before them, then write their deliveries (and the DLQ records of
//! the events that cannot be fanned out) in one transaction with the batch's offsets.
//!
//! Exactly once: the deliveries and the consumed offsets commit together or not at all
//! (`read_committed` readers never see an aborted delivery); a transaction is open only
//! between two polls, so a rebalance never finds one open; and the offsets are committed
//! with the group generation of the batch, so a member that lost its partitions meanwhile
//! is fenced by the broker (KIP-447). Any failure of a transaction aborts it and starts a
//! new session, which resumes from the committed offsets.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_core::envelope::ErrorReason;
use hookline_core::event::confluent_schema_id;
use hookline_core::headers::{DeliveryMeta, is_delivery_header};
use hookline_core::pause::Pauses;
use hookline_kafka::FutureProducer;
use hookline_kafka::Registry;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{
    BaseConsumer, Consumer, ConsumerContext, ConsumerGroupMetadata, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

use super::kafka::{CALL_TIMEOUT, blocking, owned_headers, partitions, send, settle};
use super::plan::{self, Encoding, Plan};
use crate::attempts::hooks;
use crate::clock::now_ms;
use crate::endpoints::EndpointTable;
use crate::envelope::{Failure, build_envelope};
use crate::error::{DispatchError, Result};
use crate::metrics::{FanoutMetrics, FanoutOutcome, Metrics};
use crate::record::{SourceRecord, TopicNames};
use crate::settings::Settings;

/// How long to wait for the endpoint table before saying so (and waiting on).
const TABLE_WAIT: Duration = Duration::from_secs(5);
/// A broken session is started again after this, doubling up to a minute.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// What the fan-out stage works with.
pub(crate) struct Stage {
    pub settings: Arc<Settings>,
    pub endpoints: Arc<EndpointTable>,
    pub registry: Arc<Registry>,
    pub metrics: Metrics,
    /// The DLQ envelope schema's id.
    pub dlq_schema_id: u32,
    /// The current event schema's id under the events topic's subject.
    pub event_schema_id: u32,
    /// The attempt log (`fanned_out` records).
    pub attempt_log: crate::attempts::AttemptLog,
    /// The cancellations: a tenant event cancelled whole is not fanned out.
    pub cancellations: Arc<crate::cancellations::CancellationSet>,
}

/// Counts rebalances, so that a batch taken before one is dropped (it is read again).
struct FanoutContext {
    rebalances: Arc<AtomicU64>,
}

impl ClientContext for FanoutContext {}

impl ConsumerContext for FanoutContext {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.rebalances.fetch_add(1, Ordering::SeqCst);
        match rebalance {
            Rebalance::Revoke(list) => {
                tracing::info!(partitions = list.count(), "fan-out partitions revoked");
            }
            Rebalance::Assign(list) => {
                tracing::info!(partitions = list.count(), "fan-out partitions assigned");
            }
            Rebalance::Error(error) => tracing::warn!(%error, "fan-out rebalance error"),
        }
    }
}

/// Record headers, as names and values.
type Headers = Vec<(String, Vec<u8>)>;

/// One consumed tenant event.
struct Taken {
    record: SourceRecord,
    timestamp_ms: Option<i64>,
}

/// A tenant event with what becomes of it.
struct Planned {
    taken: Taken,
    headers: Headers,
    plan: Plan,
    event: Option<WebhookEvent>,
}

/// Runs the fan-out until `shutdown`, starting a new session after any failure.
pub(crate) async fn run(stage: Stage, shutdown: CancellationToken) -> Result<()> {
    let mut pauses = Pauses::new(FIRST_BACKOFF, Duration::from_secs(60));
    loop {
        match session(&stage, &shutdown).await {
            Ok(()) => return Ok(()),
            Err(_) if shutdown.is_cancelled() => return Ok(()),
            Err(error) => {
                let cause = std::error::Error::source(&error).map(ToString::to_string);
                tracing::error!(%error, ?cause, "the fan-out session failed; starting a new one");
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep(pauses.next_pause()) => {}
                }
            }
        }
    }
}

struct Session<'a> {
    stage: &'a Stage,
    consumer: Arc<StreamConsumer<FanoutContext>>,
    producer: FutureProducer,
    rebalances: Arc<AtomicU64>,
    endpoint_partitions: Vec<i32>,
}

async fn session(stage: &Stage, shutdown: &CancellationToken) -> Result<()> {
    let settings = &stage.settings;
    let fanout = &settings.fanout;
    let rebalances = Arc::new(AtomicU64::new(0));
    let mut config = settings.kafka.client_config();
    // The classic protocol with an eager assignor: every rebalance revokes everything, so a
    // batch taken before it is simply read again from the committed offsets.
    config
        .set("group.id", &fanout.group_id)
        .set("group.protocol", "classic")
        .set("partition.assignment.strategy", "range")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "false");
    if let Some(timeout) = settings.session_timeout {
        let ms = timeout.as_millis().max(6_000);
        config
            .set("session.timeout.ms", ms.to_string())
            .set("heartbeat.interval.ms", (ms / 3).to_string());
    }
    if let Some(instance) = &settings.group_instance_id {
        config.set("group.instance.id", format!("{instance}-fanout"));
    }
    let consumer: StreamConsumer<FanoutContext> = config
        .create_with_context(FanoutContext {
            rebalances: Arc::clone(&rebalances),
        })
        .map_err(|source| DispatchError::kafka("creating the fan-out consumer", source))?;
    consumer
        .subscribe(&[fanout.topic.as_str()])
        .map_err(|source| DispatchError::kafka("subscribing to the fan-out topic", source))?;
    let queue = (fanout.max_batch_deliveries * 2).max(100_000).to_string();
    let producer: FutureProducer = settings
        .kafka
        .producer_config()
        .set("transactional.id", &fanout.transactional_id)
        .set(
            "transaction.timeout.ms",
            fanout.transaction_timeout.as_millis().to_string(),
        )
        .set("queue.buffering.max.messages", queue)
        // librdkafka refuses a message timeout above the transaction timeout.
        .set(
            "message.timeout.ms",
            fanout.transaction_timeout.as_millis().to_string(),
        )
        .create()
        .map_err(|source| DispatchError::kafka("creating the fan-out producer", source))?;
    let consumer = Arc::new(consumer);
    let endpoint_partitions = match &settings.endpoints_topic {
        Some(topic) => partitions(&consumer, topic).await?,
        None => Vec::new(),
    };
    // Fences an earlier producer of this transactional id, aborting what it left open.
    blocking(&producer, |p| p.init_transactions(CALL_TIMEOUT)).await?;
    tracing::info!(
        topic = fanout.topic,
        group = fanout.group_id,
        transactional_id = fanout.transactional_id,
        "fan-out stage started"
    );
    let session = Session {
        stage,
        consumer,
        producer,
        rebalances,
        endpoint_partitions,
    };
    loop {
        let Some((batch, taken_at)) = session.collect(shutdown).await else {
            return Ok(());
        };
        if batch.is_empty() {
            continue;
        }
        session.wait_for_endpoints(shutdown).await?;
        session.commit(batch, taken_at, shutdown).await?;
    }
}

impl Session<'_> {
    /// Waits for a first tenant event, then takes more for up to the linger time; `None` on
    /// shutdown. Returns the rebalance count the batch was taken under.
    async fn collect(&self, shutdown: &CancellationToken) -> Option<(Vec<Taken>, u64)> {
        let fanout = &self.stage.settings.fanout;
        let first = tokio::select! {
            () = shutdown.cancelled() => return None,
            message = self.consumer.recv() => message,
        };
        let taken_at = self.rebalances.load(Ordering::SeqCst);
        let mut batch = Vec::new();
        let mut topics = TopicNames::default();
        match first {
            Ok(message) => batch.push(Taken {
                record: SourceRecord::from_message(&message, &mut topics),
                timestamp_ms: message.timestamp().to_millis(),
            }),
            Err(error) => {
                tracing::warn!(%error, "reading the fan-out topic failed");
                tokio::time::sleep(Duration::from_millis(200)).await;
                return Some((batch, taken_at));
            }
        }
        let until = tokio::time::Instant::now() + fanout.linger;
        while batch.len() < fanout.max_batch_events {
            match tokio::time::timeout_at(until, self.consumer.recv()).await {
                Ok(Ok(message)) => batch.push(Taken {
                    record: SourceRecord::from_message(&message, &mut topics),
                    timestamp_ms: message.timestamp().to_millis(),
                }),
                Ok(Err(_)) | Err(_) => break,
            }
        }
        if self.rebalances.load(Ordering::SeqCst) != taken_at {
            // Taken across a rebalance: the partitions start again from what is committed.
            return Some((Vec::new(), taken_at));
        }
        Some((batch, taken_at))
    }

    /// Waits until the endpoint table has read the endpoints topic to the end it has now,
    /// after the batch was taken: every endpoint change acknowledged before a tenant event
    /// was published is then in the table when the event is fanned out.
    async fn wait_for_endpoints(&self, shutdown: &CancellationToken) -> Result<()> {
        let Some(topic) = self.stage.settings.endpoints_topic.clone() else {
            return Ok(());
        };
        let consumer = Arc::clone(&self.consumer);
        let partitions = self.endpoint_partitions.clone();
        let ends = tokio::task::spawn_blocking(move || {
            partitions
                .into_iter()
                .map(|p| {
                    consumer
                        .fetch_watermarks(&topic, p, CALL_TIMEOUT)
                        .map(|(_, high)| (p, high))
                })
                .collect::<std::result::Result<BTreeMap<i32, i64>, KafkaError>>()
        })
        .await
        .map_err(|error| DispatchError::Internal(format!("watermarks task failed: {error}")))?
        .map_err(|source| DispatchError::kafka("reading the endpoints topic's end", source))?;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Err(DispatchError::ShutdownDuringStartup),
                reached = self.stage.endpoints.wait_read_to(&ends, TABLE_WAIT) => {
                    if reached {
                        return Ok(());
                    }
                    tracing::warn!("the endpoint table is behind the endpoints topic; waiting");
                }
            }
        }
    }

    /// Decodes one tenant event and plans its deliveries.
    async fn plan(&self, taken: Taken, shutdown: &CancellationToken) -> Planned {
        let settings = &self.stage.settings;
        let park = |taken: Taken, failure: Failure, event: Option<WebhookEvent>| Planned {
            headers: Vec::new(),
            plan: Plan::Park(failure),
            event,
            taken,
        };
        let (event, encoding) = match self.decode(&taken.record, shutdown).await {
            Ok(decoded) => decoded,
            Err(failure) => return park(taken, failure, None),
        };
        if let Err(failure) =
            plan::check(&event, settings.max_payload_bytes, &settings.events_topic)
        {
            return park(taken, failure, Some(event));
        }
        if let Some(failure) =
            crate::cancellations::before_fanout(&self.stage.cancellations, &event, now_ms())
        {
            return park(taken, failure, Some(event));
        }
        let tenant = event.tenant_id.as_deref().unwrap_or_default();
        let subscribers =
            self.stage
                .endpoints
                .subscribers(tenant, &event.event_type, &event.channels);
        let headers = plan::headers(&taken.record, &event.event_id);
        let plan = plan::plan(
            &event,
            subscribers,
            encoding,
            &headers,
            settings.max_message_bytes,
        );
        Planned {
            taken,
            headers,
            plan,
            event: Some(event),
        }
    }

    /// The event and how its deliveries are encoded (as it was). A registry that cannot
    /// answer is waited for: the fan-out keeps its order.
    async fn decode(
        &self,
        record: &SourceRecord,
        shutdown: &CancellationToken,
    ) -> std::result::Result<(WebhookEvent, Encoding), Failure> {
        let malformed = |message: String| Failure::new(ErrorReason::MalformedEvent, message);
        if let Some(name) = &record.bad_header_name {
            return Err(malformed(format!("a header name is not UTF-8 ({name:?})")));
        }
        let Some(value) = record.value.as_deref() else {
            return Err(malformed("the record has no value".to_owned()));
        };
        if confluent_schema_id(value).is_none() {
            return WebhookEvent::from_json(value)
                .map(|event| (event, Encoding::Json))
                .map_err(|error| malformed(format!("not a webhook event: {error}")));
        }
        let mut pauses = Pauses::new(Duration::from_millis(200), Duration::from_secs(10));
        let decoded = loop {
            match self.stage.registry.decode(value).await {
                Ok(decoded) => break decoded,
                Err(error) if error.is_transient() && !shutdown.is_cancelled() => {
                    self.stage.metrics.registry_wait();
                    tracing::warn!(%error, "the registry cannot answer; waiting to fan out");
                    tokio::time::sleep(pauses.next_pause()).await;
                }
                Err(error) => {
                    return Err(malformed(format!("cannot decode the Avro value: {error}")));
                }
            }
        };
        let encoding = Encoding::Avro {
            schema_id: self.stage.event_schema_id,
        };
        WebhookEvent::from_avro_value(decoded)
            .map(|event| (event, encoding))
            .map_err(|error| malformed(format!("not a webhook event: {error}")))
    }

    /// Writes the batch in transactions of at most `max_batch_deliveries` deliveries each
    /// (an event's deliveries are never split), each with the offsets of its events.
    /// Events are planned as they are written, so that at most one transaction's
    /// deliveries (and one event's) are held at once.
    async fn commit(
        &self,
        batch: Vec<Taken>,
        taken_at: u64,
        shutdown: &CancellationToken,
    ) -> Result<()> {
        let limit = self.stage.settings.fanout.max_batch_deliveries;
        let mut chunk = Vec::new();
        let mut size = 0;
        for taken in batch {
            let item = self.plan(taken, shutdown).await;
            size += match &item.plan {
                Plan::Deliver(deliveries) => deliveries.len(),
                Plan::Park(_) => 1,
            };
            chunk.push(item);
            if size >= limit {
                self.transaction(std::mem::take(&mut chunk), taken_at)
                    .await?;
                size = 0;
            }
        }
        if !chunk.is_empty() {
            self.transaction(chunk, taken_at).await?;
        }
        Ok(())
    }

    async fn transaction(&self, chunk: Vec<Planned>, taken_at: u64) -> Result<()> {
        let written = self.write(&chunk, taken_at).await;
        let metrics = &self.stage.metrics.fanout;
        match written {
            Ok(()) => {
                let now = now_ms();
                metrics.committed(chunk.iter().filter_map(|p| {
                    let ms = now.saturating_sub(p.taken.timestamp_ms?);
                    Some(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
                }));
                for planned in &chunk {
                    emit(metrics, planned);
                    if let (Plan::Deliver(deliveries), Some(event)) =
                        (&planned.plan, &planned.event)
                    {
                        let log = &self.stage.attempt_log;
                        hooks::fanned_out(log, event, &planned.taken.record, deliveries.len());
                    }
                }
                Ok(())
            }
            Err(error) => {
                metrics.transaction("aborted");
                if let Err(abort) =
                    blocking(&self.producer, |p| p.abort_transaction(CALL_TIMEOUT)).await
                {
                    tracing::warn!(error = %abort, "aborting the fan-out transaction failed");
                }
                Err(error)
            }
        }
    }

    async fn write(&self, chunk: &[Planned], taken_at: u64) -> Result<()> {
        let settings = &self.stage.settings;
        let metadata: ConsumerGroupMetadata = self
            .consumer
            .group_metadata()
            .ok_or_else(|| DispatchError::Internal("the fan-out consumer has no group".into()))?;
        blocking(&self.producer, |p| p.begin_transaction()).await?;
        let mut pending = Vec::new();
        let mut offsets: BTreeMap<i32, i64> = BTreeMap::new();
        for planned in chunk {
            let record = &planned.taken.record;
            let next = offsets.entry(record.partition).or_insert(0);
            *next = (*next).max(record.offset + 1);
            match &planned.plan {
                Plan::Deliver(deliveries) => {
                    let headers = owned_headers(&planned.headers);
                    for delivery in deliveries {
                        let record = FutureRecord::to(&settings.events_topic)
                            .key(delivery.endpoint.as_bytes())
                            .payload(&delivery.value)
                            .headers(headers.clone());
                        send(&self.producer, record, &mut pending).await?;
                    }
                }
                Plan::Park(failure) => {
                    let (value, headers) = self.envelope(planned, failure)?;
                    let mut out = FutureRecord::to(&settings.dlq_topic)
                        .payload(&value)
                        .headers(owned_headers(&headers));
                    if let Some(key) = record.key.as_deref() {
                        out = out.key(key);
                    }
                    send(&self.producer, out, &mut pending).await?;
                }
            }
        }
        settle(&mut pending).await?;
        if self.rebalances.load(Ordering::SeqCst) != taken_at {
            return Err(DispatchError::Internal(
                "the fan-out group rebalanced during a transaction".into(),
            ));
        }
        let mut list = TopicPartitionList::new();
        for (partition, next) in offsets {
            list.add_partition_offset(&settings.fanout.topic, partition, Offset::Offset(next))
                .map_err(|source| DispatchError::kafka("listing the fan-out offsets", source))?;
        }
        blocking(&self.producer, move |p| {
            p.send_offsets_to_transaction(&list, &metadata, CALL_TIMEOUT)
        })
        .await?;
        blocking(&self.producer, |p| p.commit_transaction(CALL_TIMEOUT)).await
    }

    /// The DLQ record of a tenant event that cannot be fanned out: its envelope, cut to fit,
    /// and the event's own headers.
    fn envelope(&self, planned: &Planned, failure: &Failure) -> Result<(Vec<u8>, Headers)> {
        let settings = &self.stage.settings;
        let record = &planned.taken.record;
        let meta = DeliveryMeta::new(&*record.topic, record.partition, record.offset);
        let mut envelope = build_envelope(
            record,
            &meta,
            planned.event.as_ref(),
            failure,
            now_ms(),
            &settings.dispatcher_id,
        );
        let headers: Headers = record
            .headers
            .iter()
            .filter(|(name, _)| !is_delivery_header(name))
            .map(|(name, value)| (name.clone(), value.clone().unwrap_or_default()))
            .collect();
        let beside: usize = headers
            .iter()
            .map(|(n, v)| n.len() + v.len())
            .sum::<usize>()
            + record.key.as_ref().map_or(0, Vec::len)
            + 1024;
        let _ = envelope.fit_within(settings.max_message_bytes.saturating_sub(beside));
        let value = envelope
            .to_framed_avro(self.stage.dlq_schema_id)
            .map_err(|error| {
                DispatchError::Internal(format!("encoding a DLQ envelope: {error}"))
            })?;
        Ok((value, headers))
    }
}

/// Logs what became of one committed tenant event and counts it.
fn emit(metrics: &FanoutMetrics, planned: &Planned) {
    let record = &planned.taken.record;
    let event_id = planned.event.as_ref().map(|e| e.event_id.as_str());
    let tenant = planned.event.as_ref().and_then(|e| e.tenant_id.as_deref());
    match &planned.plan {
        Plan::Deliver(deliveries) if deliveries.is_empty() => {
            metrics.event(FanoutOutcome::NoSubscribers, 0);
            tracing::info!(
                event_id,
                tenant,
                "no endpoint subscribes to this tenant event"
            );
        }
        Plan::Deliver(deliveries) => {
            metrics.event(FanoutOutcome::FannedOut, deliveries.len());
            tracing::debug!(
                event_id,
                tenant,
                deliveries = deliveries.len(),
                "fanned out"
            );
        }
        Plan::Park(failure) => {
            metrics.event(FanoutOutcome::Parked, 0);
            tracing::warn!(
                event_id,
                tenant,
                partition = record.partition,
                offset = record.offset,
                reason = failure.reason.code(),
                message = failure.message,
                "tenant event parked in the DLQ"
            );
        }
    }
}
