//! Starting and running a dispatcher: check the registry and topics, load endpoints, then
//! the poll loop that hands records to bounded delivery tasks, pauses retry partitions
//! whose head is not due, and drains on shutdown.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hookline_core::envelope::ENVELOPE_VERSION;
use hookline_core::schema::DLQ_ENVELOPE_CURRENT;
use hookline_kafka::Registry;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::FutureProducer;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::admin::{self, Readiness};
use crate::config::Settings;
use crate::context::{DispatchContext, commit};
use crate::deliver::HttpSender;
use crate::endpoints::{EndpointDefaults, EndpointTable, follow_topic, load_file};
use crate::error::{DispatchError, Result};
use crate::metrics::Metrics;
use crate::offsets::PartitionKey;
use crate::process::{Ctx, deliver};
use crate::record::SourceRecord;
use crate::route::Router;
use crate::shared::Shared;

type DispatchConsumer = StreamConsumer<DispatchContext>;

/// A started dispatcher.
pub struct Running {
    admin_addr: Option<SocketAddr>,
    metrics: Metrics,
    readiness: Arc<Readiness>,
    task: tokio::task::JoinHandle<Result<()>>,
}

impl Running {
    /// Where the admin port listens, when it is enabled.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The dispatcher's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Whether it is delivering (what `/readyz` says).
    pub fn is_ready(&self) -> bool {
        self.readiness.is_ready()
    }

    /// Waits until the dispatcher has stopped (after `shutdown` was cancelled, or on a fatal
    /// error).
    pub async fn wait(self) -> Result<()> {
        self.task
            .await
            .map_err(|error| DispatchError::Internal(format!("dispatcher task failed: {error}")))?
    }
}

/// Starts a dispatcher. Errors found at start-up (registry refusing the DLQ schema, missing
/// topics, bad endpoints file, admin port taken) are returned here; after that it runs until
/// `shutdown` is cancelled, then drains in-flight deliveries, commits and stops.
pub async fn start(settings: Settings, shutdown: CancellationToken) -> Result<Running> {
    let settings = Arc::new(settings);
    let metrics = Metrics::new();
    let readiness = Arc::new(Readiness::default());

    // The DLQ's schema is registered first, so an incompatible change fails start-up rather
    // than the first parked record.
    let registry = Arc::new(Registry::new(&settings.registry)?);
    let dlq_subject = format!("{}-value", settings.dlq_topic);
    let level = settings.dlq_compatibility;
    registry.ensure_compatibility(&dlq_subject, level).await?;
    // A refusal (409: incompatible with what the subject holds) names the subject, the level
    // and the registry's own message (the `message` of its JSON answer).
    let schema_id = registry
        .register(&dlq_subject, DLQ_ENVELOPE_CURRENT)
        .await
        .map_err(|error| match error {
            hookline_kafka::Error::RegistryRefused { status, body, .. } => {
                hookline_kafka::Error::RegistryRefused {
                    context: format!(
                        "the DLQ envelope schema v{ENVELOPE_VERSION} under subject \
                         {dlq_subject} with compatibility {level}"
                    ),
                    status,
                    body: serde_json::from_str::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|answer| answer.get("message")?.as_str().map(str::to_owned))
                        .unwrap_or(body),
                }
            }
            other => other,
        })?;
    tracing::info!(
        subject = dlq_subject,
        schema_id,
        envelope_version = ENVELOPE_VERSION,
        compatibility = %level,
        "DLQ schema registered"
    );

    let mut topics = vec![settings.events_topic.clone(), settings.dlq_topic.clone()];
    topics.extend(settings.tiers.topics(&settings.events_topic));
    check_topics(&settings, &topics).await?;

    let endpoints = Arc::new(EndpointTable::new(EndpointDefaults {
        max_concurrency: settings.per_endpoint_concurrency,
        timeout: settings.timeout,
        queue: settings.per_endpoint_queue,
        retry: settings.retry,
        breaker_failures: settings.breaker_failures,
        breaker_open_for: settings.breaker_open_for,
    }));
    if let Some(path) = &settings.endpoints_file {
        let count = load_file(path, &endpoints)?;
        tracing::info!(path = %path.display(), endpoints = count, "endpoints file loaded");
    }
    if let Some(topic) = &settings.endpoints_topic {
        follow_topic(
            &settings.kafka,
            topic,
            Arc::clone(&endpoints),
            shutdown.clone(),
        )
        .await?;
    }
    readiness.set_endpoints_loaded();

    let admin_addr = match settings.admin_listen {
        Some(listen) => Some(
            admin::serve(
                listen,
                metrics.clone(),
                Arc::clone(&readiness),
                shutdown.clone(),
            )
            .await
            .map_err(|source| DispatchError::Admin {
                listen: listen.to_string(),
                source,
            })?,
        ),
        None => None,
    };

    let producer: FutureProducer = settings
        .kafka
        .producer_config()
        .create()
        .map_err(|source| DispatchError::kafka("creating the producer", source))?;
    let abandon = CancellationToken::new();
    let ctx = Arc::new(Ctx {
        http: HttpSender::new(
            Arc::new(settings.address_policy.clone()),
            &settings.user_agent,
            settings.max_response_bytes,
        )
        .map_err(DispatchError::Http)?,
        router: Router::new(
            producer,
            Arc::clone(&registry),
            settings.dlq_topic.clone(),
            abandon.clone(),
        ),
        registry,
        endpoints,
        metrics: metrics.clone(),
        global: Arc::new(Semaphore::new(settings.max_in_flight)),
        abandon: abandon.clone(),
        settings: Arc::clone(&settings),
    });

    let shared = Arc::new(Shared::new(Arc::clone(&readiness)));
    let context = DispatchContext {
        shared: Arc::clone(&shared),
        drain_timeout: settings.shutdown_grace,
    };
    let consumer: DispatchConsumer = settings
        .kafka
        .consumer_config(&settings.group_id)
        .create_with_context(context)
        .map_err(|source| DispatchError::kafka("creating the consumer", source))?;
    let consumer = Arc::new(consumer);
    let subscribed: Vec<&str> = topics
        .iter()
        .filter(|t| **t != settings.dlq_topic)
        .map(String::as_str)
        .collect();
    consumer
        .subscribe(&subscribed)
        .map_err(|source| DispatchError::kafka("subscribing", source))?;
    tracing::info!(group = settings.group_id, topics = ?subscribed, dispatcher = settings.dispatcher_id, "dispatcher started");

    spawn_lag_gauge(Arc::clone(&consumer), metrics.clone(), shutdown.clone());
    let task = tokio::spawn(run_loop(consumer, shared, ctx, shutdown, abandon));
    Ok(Running {
        admin_addr,
        metrics,
        readiness,
        task,
    })
}

/// Fails with the first of `topics` that the cluster does not have.
async fn check_topics(settings: &Settings, topics: &[String]) -> Result<()> {
    let consumer: rdkafka::consumer::BaseConsumer = settings
        .kafka
        .client_config()
        .create()
        .map_err(|source| DispatchError::kafka("creating a metadata client", source))?;
    let topics = topics.to_vec();
    tokio::task::spawn_blocking(move || {
        let metadata = consumer
            .fetch_metadata(None, Duration::from_secs(10))
            .map_err(|source| DispatchError::kafka("reading cluster metadata", source))?;
        for topic in topics {
            let exists = metadata
                .topics()
                .iter()
                .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty());
            if !exists {
                return Err(DispatchError::MissingTopic(topic));
            }
        }
        Ok(())
    })
    .await
    .map_err(|error| DispatchError::Internal(format!("metadata check failed: {error}")))?
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Records due this close to now are handled rather than paused for.
const DUE_SLACK_MS: i64 = 5;

async fn run_loop(
    consumer: Arc<DispatchConsumer>,
    shared: Arc<Shared>,
    ctx: Arc<Ctx>,
    shutdown: CancellationToken,
    abandon: CancellationToken,
) -> Result<()> {
    let settings = Arc::clone(&ctx.settings);
    let pending = Arc::new(Semaphore::new(settings.max_pending));
    let mut tasks = JoinSet::new();
    let mut chains = OrderChains::new();
    loop {
        let next_resume = shared.next_resume().map(tokio::time::Instant::from_std);
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                if let Err(error) = joined {
                    tracing::error!(%error, "a delivery task failed");
                }
            }
            () = sleep_until(next_resume), if next_resume.is_some() => {
                resume_due(&consumer, &shared);
            }

            message = consumer.recv(), if pending.available_permits() > 0 => {
                let message = match message {
                    Ok(message) => message,
                    Err(error) => {
                        tracing::warn!(%error, "consumer error");
                        continue;
                    }
                };
                let record = SourceRecord::from_message(&message);
                drop(message);
                let key = record.partition_key();
                if shared.is_paused(&key) {
                    // Fetched before the pause took effect; it is fetched again on resume.
                    continue;
                }
                if let Some(due_ms) = record.meta().ok().flatten().and_then(|meta| meta.due_at_ms) {
                    let wait_ms = due_ms - now_ms();
                    if wait_ms > DUE_SLACK_MS {
                        let wait = Duration::from_millis(u64::try_from(wait_ms).unwrap_or(0));
                        pause_until(&consumer, &shared, &record, Instant::now() + wait);
                        continue;
                    }
                }
                let Ok(permit) = Arc::clone(&pending).try_acquire_owned() else {
                    return Err(DispatchError::Internal("pending permits ran out".to_owned()));
                };
                ctx.metrics.set_in_flight(shared.start(&key, record.offset));
                let (after, done) = order_chain(&ctx, &record, &mut chains);
                let (ctx, shared, consumer) = (Arc::clone(&ctx), Arc::clone(&shared), Arc::clone(&consumer));
                tasks.spawn(async move {
                    let _permit = permit;
                    let _done = done;
                    if let Some(previous) = after {
                        // Ends when the previous record of the same strict endpoint is done
                        // (its sender dropped), whatever its outcome.
                        let _ = previous.await;
                    }
                    if deliver(&ctx, &record).await.is_ok() {
                        ctx.metrics.set_in_flight(shared.finish(consumer.as_ref(), &key, record.offset));
                    }
                });
            }
        }
    }

    // Shutdown: stop fetching, let running deliveries finish within the grace period,
    // commit what is durable, leave the group.
    shared.readiness.set_consuming(false);
    if let Ok(assignment) = consumer.assignment()
        && let Err(error) = consumer.pause(&assignment)
    {
        tracing::debug!(%error, "pausing on shutdown");
    }
    let in_flight = tasks.len();
    tracing::info!(in_flight, "shutting down: draining deliveries");
    let drained = tokio::time::timeout(settings.shutdown_grace, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            left = tasks.len(),
            "grace period over; abandoning the rest (delivered again later)"
        );
        abandon.cancel();
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        shared.forget_all();
    }
    commit(consumer.as_ref());
    // Closing the consumer leaves the group with blocking calls: off the async workers.
    tokio::task::spawn_blocking(move || {
        consumer.unsubscribe();
        drop(consumer);
    })
    .await
    .map_err(|error| DispatchError::Internal(format!("closing the consumer: {error}")))?;
    tracing::info!("dispatcher stopped");
    Ok(())
}

/// The last record of each strict-ordering endpoint per partition: the next one waits for it.
type OrderChains = HashMap<(PartitionKey, String), oneshot::Receiver<()>>;

/// For a record of a strict-ordering endpoint (its key names the endpoint): what to wait
/// for before delivering it, and the sender whose drop lets the next one go.
fn order_chain(
    ctx: &Ctx,
    record: &SourceRecord,
    chains: &mut OrderChains,
) -> (Option<oneshot::Receiver<()>>, Option<oneshot::Sender<()>>) {
    let Some(endpoint_id) = record
        .key
        .as_deref()
        .and_then(|key| std::str::from_utf8(key).ok())
    else {
        return (None, None);
    };
    let strict = ctx
        .endpoints
        .get(endpoint_id)
        .is_some_and(|e| e.config.strict_ordering);
    if !strict {
        return (None, None);
    }
    let (done, next) = oneshot::channel();
    let previous = chains.insert((record.partition_key(), endpoint_id.to_owned()), next);
    (previous, Some(done))
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Pauses the record's partition and rewinds it to the record, which is fetched again when
/// it is due. The consumer keeps polling meanwhile (no sleep, no spin, no poll-interval
/// breach); other partitions flow.
fn pause_until(
    consumer: &DispatchConsumer,
    shared: &Shared,
    record: &SourceRecord,
    until: Instant,
) {
    let mut list = TopicPartitionList::new();
    list.add_partition(&record.topic, record.partition);
    if let Err(error) = consumer.pause(&list) {
        tracing::warn!(%error, topic = record.topic, "pausing a partition failed");
    }
    if let Err(error) = consumer.seek(
        &record.topic,
        record.partition,
        Offset::Offset(record.offset),
        Duration::ZERO,
    ) {
        tracing::warn!(%error, topic = record.topic, "rewinding a partition failed");
    }
    shared.rewind(&record.partition_key(), record.offset, until);
    tracing::debug!(
        topic = record.topic,
        partition = record.partition,
        offset = record.offset,
        "paused until due"
    );
}

/// Updates the consumer-lag gauge every few seconds until `shutdown`.
fn spawn_lag_gauge(
    consumer: Arc<DispatchConsumer>,
    metrics: crate::metrics::Metrics,
    shutdown: CancellationToken,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(10));
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let reader = Arc::clone(&consumer);
            // Watermark queries are blocking broker round trips.
            if let Ok(Some(lag)) = tokio::task::spawn_blocking(move || consumer_lag(&reader)).await
            {
                metrics.set_lag(lag);
            }
        }
    });
}

/// Records between the consumer's positions and the high watermarks, over its assigned
/// partitions.
fn consumer_lag(consumer: &DispatchConsumer) -> Option<i64> {
    let positions = consumer.position().ok()?;
    let mut lag = 0;
    for element in positions.elements() {
        let Offset::Offset(position) = element.offset() else {
            continue;
        };
        let watermarks =
            consumer.fetch_watermarks(element.topic(), element.partition(), Duration::from_secs(2));
        if let Ok((_, high)) = watermarks {
            lag += (high - position).max(0);
        }
    }
    Some(lag)
}

fn resume_due(consumer: &DispatchConsumer, shared: &Shared) {
    for (topic, partition) in shared.take_due(Instant::now()) {
        let mut list = TopicPartitionList::new();
        list.add_partition(&topic, partition);
        if let Err(error) = consumer.resume(&list) {
            tracing::warn!(%error, topic, "resuming a partition failed");
        }
    }
}
