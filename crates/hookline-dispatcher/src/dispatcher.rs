//! Starting a dispatcher: reach the delivery ledger (when configured), register the DLQ
//! schema, check the topics, load the endpoints, open the admin port, then hand over to the
//! poll loop. Every task it starts is tracked and awaited when it stops.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hookline_core::envelope::ENVELOPE_VERSION;
use hookline_core::schema::{DLQ_ENVELOPE_CURRENT, WEBHOOK_EVENT_CURRENT};
use hookline_kafka::FutureProducer;
use hookline_kafka::{Registry, STARTUP_PATIENCE, with_patience};
use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::Consumer;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admin;
use crate::admission::Admission;
use crate::attempts;
use crate::cancellations::CancellationSet;
use crate::config::GroupProtocol;
use crate::context::DispatchContext;
use crate::delivery::{Ctx, Writer};
use crate::endpoints::lifecycle::EndpointLifecycle;
use crate::endpoints::{EndpointDefaults, EndpointTable, load_file};
use crate::error::{DispatchError, Result};
use crate::fanout;
use crate::http::{ClientFactory, HttpSender};
use crate::metrics::Metrics;
use crate::operator::{self, Operator};
use crate::poll::{DispatchConsumer, lag_gauge, run_loop};
use crate::readiness::Readiness;
use crate::settings::Settings;
use crate::shared::Shared;
use crate::telemetry::Telemetry;
use hookline_producer::EndpointStore;

/// A started dispatcher.
pub struct Running {
    admin_addr: Option<SocketAddr>,
    metrics: Metrics,
    readiness: Arc<Readiness>,
    task: tokio::task::JoinHandle<Result<()>>,
    tracker: TaskTracker,
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
        let stopped = self
            .task
            .await
            .map_err(|error| DispatchError::Internal(format!("dispatcher task failed: {error}")))?;
        // The poll loop is done; the endpoints follower, the admin port and the lag gauge end
        // with the same shutdown token.
        self.tracker.close();
        self.tracker.wait().await;
        stopped
    }
}

/// Starts a dispatcher. Errors found at start-up (a configured ledger's Redis not answering,
/// registry refusing the DLQ schema, missing topics, bad endpoints file, admin port taken)
/// are returned here; after that it runs until
/// `shutdown` is cancelled, then drains in-flight deliveries, commits and stops.
pub async fn start(settings: Settings, shutdown: CancellationToken) -> Result<Running> {
    let settings = Arc::new(settings);
    let tracker = TaskTracker::new();
    let metrics = Metrics::new();
    let readiness = Arc::new(Readiness::default());

    let ledger = crate::ledger::start(&settings, &metrics, &tracker, &shutdown).await?;

    // The DLQ's schema is registered first, so an incompatible change fails start-up rather
    // than the first parked record.
    let registry = Arc::new(Registry::new(&settings.registry)?);
    let schema_id = register_dlq_schema(&settings, &registry).await?;
    let attempt_log = attempt_log(&settings, &registry, &metrics, &tracker, &shutdown).await?;
    let operator = operator::start(&settings, &metrics.operator, &tracker, &shutdown)?;

    ensure_lane(&settings).await?;
    let mut topics = vec![
        settings.events_topic.clone(),
        settings.dlq_topic.clone(),
        settings.lane_topic.clone(),
    ];
    topics.extend(settings.tiers.topics(&settings.events_topic));
    let mut needed = topics.clone();
    if settings.fanout.enabled {
        needed.push(settings.fanout.topic.clone());
    }
    check_topics(&settings, &needed).await?;

    let endpoints = load_endpoints(&settings, &metrics, &tracker, &shutdown).await?;
    let cancellations = load_cancellations(&settings, &tracker, &shutdown).await?;
    watch_operator_endpoint(&settings, &endpoints, &operator);
    if settings.fanout.enabled {
        let stage = fanout_stage(
            &settings,
            &registry,
            &endpoints,
            &cancellations,
            &metrics,
            schema_id,
            attempt_log.clone(),
        )
        .await?;
        tracker.spawn(fanout_task(stage, shutdown.clone()));
    }
    readiness.set_endpoints_loaded();

    let admin_addr = serve_admin(&settings, &metrics, &readiness, &tracker, &shutdown).await?;

    let producer: FutureProducer = settings
        .kafka
        .producer_config()
        .create()
        .map_err(|source| DispatchError::kafka("creating the producer", source))?;
    let abandon = CancellationToken::new();
    let ctx = Arc::new(Ctx {
        http: HttpSender::new(&client_factory(&settings), settings.max_response_bytes)
            .map_err(DispatchError::Http)?,
        writer: Writer::new(
            producer,
            settings.dlq_topic.clone(),
            schema_id,
            settings.max_message_bytes,
        ),
        attempt_log,
        ledger,
        registry: Arc::clone(&registry),
        endpoints,
        metrics: metrics.clone(),
        global: Arc::new(Semaphore::new(settings.max_in_flight)),
        admission: Admission::new(
            settings.per_endpoint_queue,
            hookline_core::concurrency::slow_share(settings.max_in_flight),
            // A quarter of the pending records: the rest stay for the main topic and tiers.
            (settings.max_pending / 4).max(1),
        ),
        telemetry: Telemetry::new(settings.telemetry.as_ref())?,
        lifecycle: lifecycle(&settings, &metrics)?.with_operator(operator.clone()),
        cancellations,
        operator,
        settings: Arc::clone(&settings),
    });

    let shared = Arc::new(Shared::new(Arc::clone(&readiness), abandon.clone()));
    let context = DispatchContext {
        shared: Arc::clone(&shared),
        drain_timeout: settings.shutdown_grace,
    };
    if settings.group_protocol == GroupProtocol::Consumer
        && let Some(timeout) = settings.session_timeout
    {
        set_group_session_timeout(&settings, timeout).await?;
    }
    let consumer: DispatchConsumer = settings
        .consumer_config()
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
    tracing::info!(
        group = settings.group_id,
        protocol = settings.group_protocol.as_str(),
        topics = ?subscribed,
        dispatcher = settings.dispatcher_id,
        "dispatcher started"
    );

    tracker.spawn(lag_gauge(
        Arc::clone(&consumer),
        metrics.clone(),
        shutdown.clone(),
    ));
    let telemetry = ctx.telemetry.clone();
    let task = tracker.spawn(async move {
        let stopped = run_loop(consumer, shared, ctx, shutdown, abandon).await;
        // The last spans go out before the dispatcher says it stopped.
        telemetry.shutdown().await;
        stopped
    });
    Ok(Running {
        admin_addr,
        metrics,
        readiness,
        task,
        tracker,
    })
}

/// Starts the fan-out stage alone (`hookline fanout`), for those who scale it apart from the
/// deliveries: the DLQ and event schemas registered, the topics checked, the endpoint table
/// loaded and followed, the admin port opened; then it fans out until `shutdown`.
pub async fn start_fanout(settings: Settings, shutdown: CancellationToken) -> Result<Running> {
    let settings = Arc::new(settings);
    let tracker = TaskTracker::new();
    let metrics = Metrics::new();
    let readiness = Arc::new(Readiness::default());
    let registry = Arc::new(Registry::new(&settings.registry)?);
    let schema_id = register_dlq_schema(&settings, &registry).await?;
    let attempt_log = attempt_log(&settings, &registry, &metrics, &tracker, &shutdown).await?;
    let topics = [
        settings.fanout.topic.clone(),
        settings.events_topic.clone(),
        settings.dlq_topic.clone(),
    ];
    check_topics(&settings, &topics).await?;
    let endpoints = load_endpoints(&settings, &metrics, &tracker, &shutdown).await?;
    let cancellations = load_cancellations(&settings, &tracker, &shutdown).await?;
    readiness.set_endpoints_loaded();
    let admin_addr = serve_admin(&settings, &metrics, &readiness, &tracker, &shutdown).await?;
    let stage = fanout_stage(
        &settings,
        &registry,
        &endpoints,
        &cancellations,
        &metrics,
        schema_id,
        attempt_log,
    )
    .await?;
    // Ready once it runs: the fan-out has no assignment of its own to wait for.
    readiness.set_consuming(true);
    let task = tracker.spawn(fanout::run(stage, shutdown));
    Ok(Running {
        admin_addr,
        metrics,
        readiness,
        task,
        tracker,
    })
}

/// Sets the group's `consumer.session.timeout.ms` (KIP-848 keeps the session timeout on the
/// group, not the client). A broker that refuses the value (outside its
/// `group.consumer.min/max.session.timeout.ms`) stops start-up, naming the setting.
async fn set_group_session_timeout(settings: &Settings, timeout: Duration) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = settings
        .kafka
        .client_config()
        .create()
        .map_err(|source| DispatchError::kafka("creating an admin client", source))?;
    let millis = timeout.as_millis().to_string();
    let config = AlterConfig::new(ResourceSpecifier::Group(&settings.group_id))
        .set("consumer.session.timeout.ms", &millis);
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let results = admin
        .alter_configs(&[config], &options)
        .await
        .map_err(|source| DispatchError::kafka("setting the group's session timeout", source))?;
    for result in results {
        if let Err((_, code)) = result {
            return Err(DispatchError::config(
                "session_timeout_ms",
                format!(
                    "the broker refused consumer.session.timeout.ms = {millis} for group {} \
                     ({code}); it must be within the broker's \
                     group.consumer.min/max.session.timeout.ms",
                    settings.group_id
                ),
            ));
        }
    }
    tracing::info!(
        group = settings.group_id,
        session_timeout_ms = millis,
        "group session timeout set"
    );
    Ok(())
}

/// Fails with the first of `topics` that the cluster does not have.
/// Creates the slow lane when it is missing, with as many partitions as the events topic and
/// its replication factor: a topic hookline alone writes, made by the dispatcher so that a
/// deployment from before it needs no step.
async fn ensure_lane(settings: &Settings) -> Result<()> {
    let consumer: rdkafka::consumer::BaseConsumer = settings
        .kafka
        .client_config()
        .create()
        .map_err(|source| DispatchError::kafka("creating a metadata client", source))?;
    let events = settings.events_topic.clone();
    let shape = tokio::task::spawn_blocking(move || {
        let metadata = consumer
            .fetch_metadata(Some(&events), Duration::from_secs(10))
            .map_err(|source| DispatchError::kafka("reading cluster metadata", source))?;
        let shape = metadata
            .topics()
            .iter()
            .find(|t| t.name() == events && t.error().is_none())
            .map(|topic| {
                let partitions = topic.partitions();
                let count = i32::try_from(partitions.len()).unwrap_or(i32::MAX);
                let replication = partitions
                    .first()
                    .map_or(1, |p| i32::try_from(p.replicas().len()).unwrap_or(1));
                (count, replication.max(1))
            });
        Ok::<_, DispatchError>(shape)
    })
    .await
    .map_err(|error| DispatchError::Internal(format!("metadata check failed: {error}")))??;
    // A missing events topic is reported by the check that follows.
    let Some((partitions, replication)) = shape.filter(|(count, _)| *count > 0) else {
        return Ok(());
    };
    let spec = hookline_kafka::TopicSpec::new(&settings.lane_topic, partitions, replication);
    let created = hookline_kafka::ensure_topics(&settings.kafka, &[spec])
        .await
        .map_err(|source| DispatchError::CreateTopic {
            topic: settings.lane_topic.clone(),
            source: Box::new(source),
        })?;
    if !created.is_empty() {
        tracing::info!(topic = settings.lane_topic, partitions, "slow lane created");
    }
    Ok(())
}

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

/// Registers the DLQ envelope schema under `<dlq topic>-value` with the configured
/// compatibility; returns its id.
pub(crate) async fn register_dlq_schema(settings: &Settings, registry: &Registry) -> Result<u32> {
    let dlq_subject = format!("{}-value", settings.dlq_topic);
    let level = settings.dlq_compatibility;
    // A registry slow to answer (a timeout, 429, 5xx) is waited out for a while; anything
    // else stops start-up with its reason.
    with_patience("the DLQ subject's compatibility", STARTUP_PATIENCE, || {
        registry.ensure_compatibility(&dlq_subject, level)
    })
    .await?;
    // A refusal (409: incompatible with what the subject holds) names the subject, the level
    // and the registry's own message (the `message` of its JSON answer).
    let schema_id = with_patience("the DLQ schema", STARTUP_PATIENCE, || {
        registry.register(&dlq_subject, DLQ_ENVELOPE_CURRENT)
    })
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
    Ok(schema_id)
}

/// How the dispatcher's HTTP clients are built: address guard, User-Agent, extra roots.
fn client_factory(settings: &Settings) -> ClientFactory {
    ClientFactory::new(
        Arc::new(settings.address_policy.clone()),
        settings.user_agent.clone(),
        settings.ca_roots.clone(),
    )
}

/// The endpoint lifecycle, writing disabled endpoints back to the endpoints topic if any.
fn lifecycle(settings: &Settings, metrics: &Metrics) -> Result<EndpointLifecycle> {
    let store = match &settings.endpoints_topic {
        Some(topic) => Some(
            EndpointStore::new(&settings.kafka, topic).map_err(|source| {
                DispatchError::Internal(format!("creating the endpoints writer: {source}"))
            })?,
        ),
        None => None,
    };
    Ok(EndpointLifecycle::new(
        settings.lifecycle,
        store,
        metrics.lifecycle.clone(),
    ))
}

/// The endpoint table, loaded from the endpoints file and the endpoints topic (read to its
/// end), then followed until `shutdown`.
pub(crate) async fn load_endpoints(
    settings: &Settings,
    metrics: &Metrics,
    tracker: &TaskTracker,
    shutdown: &CancellationToken,
) -> Result<Arc<EndpointTable>> {
    let share = hookline_core::concurrency::endpoint_share(settings.max_in_flight);
    if settings.per_endpoint_concurrency > share {
        tracing::warn!(
            per_endpoint = settings.per_endpoint_concurrency,
            max_in_flight = settings.max_in_flight,
            effective = share,
            "concurrency.per_endpoint is above a quarter of concurrency.max_in_flight, one \
             endpoint's share: each endpoint gets at most the share; raise \
             concurrency.max_in_flight to give it more"
        );
    }
    let endpoints = Arc::new(
        EndpointTable::new(EndpointDefaults {
            max_concurrency: settings.per_endpoint_concurrency,
            max_concurrency_share: share,
            max_cap: settings
                .tiers
                .tiers()
                .last()
                .map_or(settings.retry.cap, |tier| tier.delay),
            timeout: settings.timeout,
            slow_after: settings.slow_after,
            retry: settings.retry,
            breaker: settings.breaker,
            clients: client_factory(settings),
        })
        .count_disabled_in(metrics.lifecycle.disabled_gauge()),
    );
    if let Some(path) = &settings.endpoints_file {
        let count = load_file(path, &endpoints)?;
        tracing::info!(path = %path.display(), endpoints = count, "endpoints file loaded");
    }
    if let Some(topic) = &settings.endpoints_topic {
        crate::compacted::follow(
            &settings.kafka,
            topic,
            Arc::clone(&endpoints),
            tracker,
            shutdown.clone(),
        )
        .await?;
    }
    Ok(endpoints)
}

/// The cancellations, read to the end of their topic and then followed until `shutdown`
/// (empty, and never filled, when they are disabled).
async fn load_cancellations(
    settings: &Settings,
    tracker: &TaskTracker,
    shutdown: &CancellationToken,
) -> Result<Arc<CancellationSet>> {
    let config = &settings.cancellations;
    let set = Arc::new(CancellationSet::new(
        config.forget_after,
        config.max_entries,
    ));
    if config.enabled {
        crate::compacted::follow(
            &settings.kafka,
            &config.topic,
            Arc::clone(&set),
            tracker,
            shutdown.clone(),
        )
        .await?;
    }
    Ok(set)
}

/// Opens the admin port when one is configured; returns where it listens.
pub(crate) async fn serve_admin(
    settings: &Settings,
    metrics: &Metrics,
    readiness: &Arc<Readiness>,
    tracker: &TaskTracker,
    shutdown: &CancellationToken,
) -> Result<Option<SocketAddr>> {
    Ok(match settings.admin_listen {
        Some(listen) => {
            let (bound, server) = admin::serve(
                listen,
                metrics.clone(),
                Arc::clone(readiness),
                shutdown.clone(),
            )
            .await
            .map_err(|source| DispatchError::Admin {
                listen: listen.to_string(),
                source,
            })?;
            tracker.spawn(server);
            Some(bound)
        }
        None => None,
    })
}

/// The fan-out stage of this process: the current event schema is registered under the
/// events topic's subject, for the deliveries of Avro tenant events.
pub(crate) async fn fanout_stage(
    settings: &Arc<Settings>,
    registry: &Arc<Registry>,
    endpoints: &Arc<EndpointTable>,
    cancellations: &Arc<CancellationSet>,
    metrics: &Metrics,
    dlq_schema_id: u32,
    attempt_log: attempts::AttemptLog,
) -> Result<fanout::Stage> {
    let subject = format!("{}-value", settings.events_topic);
    let event_schema_id = with_patience("the event schema", STARTUP_PATIENCE, || {
        registry.register(&subject, WEBHOOK_EVENT_CURRENT)
    })
    .await?;
    tracing::info!(
        subject,
        schema_id = event_schema_id,
        "event schema registered"
    );
    Ok(fanout::Stage {
        settings: Arc::clone(settings),
        endpoints: Arc::clone(endpoints),
        registry: Arc::clone(registry),
        metrics: metrics.clone(),
        dlq_schema_id,
        event_schema_id,
        attempt_log,
        cancellations: Arc::clone(cancellations),
    })
}

/// Once the endpoint table is loaded: `endpoint.enabled` from its changes, and a warning when
/// the operator endpoint is not (yet) in it (its notices are parked `unknown_endpoint` until
/// it is).
fn watch_operator_endpoint(settings: &Settings, endpoints: &EndpointTable, operator: &Operator) {
    let Some(ops) = &settings.operator_webhooks else {
        return;
    };
    endpoints.notify_flips_to(operator.clone());
    if endpoints.get(&ops.endpoint_id).is_none() {
        tracing::warn!(
            endpoint = ops.endpoint_id,
            "operator_webhooks.endpoint_id is not in the endpoint table; its notices are parked \
             until it is"
        );
    }
}

/// Registers the attempt schema and starts the attempt log's writer, when enabled.
async fn attempt_log(
    settings: &Settings,
    registry: &Registry,
    metrics: &Metrics,
    tracker: &TaskTracker,
    shutdown: &CancellationToken,
) -> Result<attempts::AttemptLog> {
    if !settings.attempts.enabled {
        return Ok(attempts::AttemptLog::disabled(&settings.dispatcher_id));
    }
    let id = attempts::register_attempt_schema(settings, registry).await?;
    attempts::start(settings, id, &metrics.attempt_log, tracker, shutdown)
}

/// Runs the fan-out stage beside the deliveries, logging how it ended.
async fn fanout_task(stage: fanout::Stage, shutdown: CancellationToken) {
    if let Err(error) = fanout::run(stage, shutdown).await {
        tracing::error!(%error, "the fan-out stage stopped");
    }
}
