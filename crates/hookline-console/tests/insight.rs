//! The console's endpoint and overview figures against the real stack: a dispatcher run
//! in-process on the test's own topics, a real HTTP receiver answering 200 on one path and
//! 500 on another, and [`Insight`] reading what they left in Kafka.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hookline_console::insight::{
    CircuitSource, CircuitState, EndpointRow, EndpointState, EndpointsPage, Insight, InsightConfig,
    Overview,
};
use hookline_core::WebhookEvent;
use hookline_core::endpoint::EndpointConfig;
use hookline_dispatcher::{DispatcherConfig, Running, start};
use hookline_kafka::{KafkaSettings, Registry};
use hookline_producer::EndpointStore;
use hookline_testkit::{
    Receiver, Reply, TestTopics, kafka_settings, registry_settings, unique_name, wait_until,
};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio_util::sync::CancellationToken;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DEADLINE: Duration = Duration::from_secs(90);

struct Stack {
    topics: TestTopics,
    kafka: KafkaSettings,
    registry: Arc<Registry>,
    receiver: Receiver,
    producer: FutureProducer,
    store: EndpointStore,
    group: String,
}

impl Stack {
    async fn new(test: &str) -> Stack {
        let kafka = kafka_settings();
        let topics = TestTopics::new(test, &["200ms", "1s"]);
        topics.create(&kafka, 2).await;
        Stack {
            registry: Arc::new(Registry::new(&registry_settings()).expect("registry")),
            receiver: Receiver::start().await,
            producer: kafka.producer_config().create().expect("producer"),
            store: EndpointStore::new(&kafka, &topics.endpoints).expect("endpoint store"),
            group: unique_name("dispatchers"),
            topics,
            kafka,
        }
    }

    /// A dispatcher config: the test's topics and group, 2 attempts 300 ms apart, no
    /// breaker unless a test sets one, loopback allowed, the admin port on a free port.
    fn dispatcher_config(&self) -> DispatcherConfig {
        let mut config = DispatcherConfig {
            kafka: self.kafka.clone(),
            registry: registry_settings(),
            group_id: self.group.clone(),
            ..DispatcherConfig::default()
        };
        config.topics.events = self.topics.events.clone();
        config.topics.endpoints = self.topics.endpoints.clone();
        config.topics.retry_tiers = self.topics.tiers.clone();
        config.retry.strategy = hookline_core::policy::StrategyKind::Fixed;
        config.retry.base_ms = 300;
        config.retry.cap_ms = 300;
        config.retry.max_attempts = 2;
        config.breaker.minimum_requests = 0;
        config.outbound.allow_loopback = true;
        config.admin.listen = "127.0.0.1:0".to_owned();
        config.shutdown_grace_ms = 5_000;
        config.http.timeout_ms = 2_000;
        config.fanout.enabled = false;
        config
    }

    async fn start(&self, config: DispatcherConfig, shutdown: &CancellationToken) -> Running {
        let settings = config.into_settings().expect("valid test config");
        start(settings, shutdown.clone())
            .await
            .expect("dispatcher starts")
    }

    fn insight(&self, config: InsightConfig) -> Insight {
        let config = InsightConfig {
            consumer_group: self.group.clone(),
            read_timeout_ms: 30_000,
            ..config
        };
        let settings = config
            .to_settings(&self.topics.events)
            .expect("valid insight config");
        Insight::new(
            &self.kafka,
            Arc::clone(&self.registry),
            &self.topics.endpoints,
            settings,
        )
        .expect("insight")
    }

    async fn put_endpoint(&self, id: &str, url: &str, tenant: Option<&str>) {
        let config = EndpointConfig {
            tenant: tenant.map(str::to_owned),
            ..EndpointConfig::new(url, vec![SECRET.to_owned()])
        };
        self.store.put(id, &config).await.expect("endpoint written");
    }

    async fn publish(&self, endpoint: &str, n: usize) -> String {
        let event = WebhookEvent {
            event_id: format!("evt-{}-{n}", unique_name("id")),
            event_type: "invoice.paid".to_owned(),
            endpoint_id: Some(endpoint.to_owned()),
            tenant_id: None,
            channels: Vec::new(),
            endpoint_url: None,
            payload: format!(r#"{{"invoice":{n}}}"#).into_bytes(),
            content_type: "application/json".to_owned(),
            headers: BTreeMap::new(),
            created_at_ms: hookline_console::insight::now_ms(),
            expires_at_ms: None,
        };
        let value = event.to_json();
        self.producer
            .send(
                FutureRecord::to(&self.topics.events)
                    .key(endpoint)
                    .payload(&value),
                DEADLINE,
            )
            .await
            .expect("event written");
        event.event_id
    }
}

fn row<'a>(page: &'a EndpointsPage, id: &str) -> Option<&'a EndpointRow> {
    page.tenants
        .iter()
        .flat_map(|tenant| &tenant.endpoints)
        .find(|row| row.id == id)
}

async fn stop(running: Running, shutdown: &CancellationToken) {
    shutdown.cancel();
    running.wait().await.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn health_and_deliveries_by_status_match_what_the_receivers_answered() {
    let stack = Stack::new("insight-health").await;
    let ok_url = stack.receiver.script("ok", |_| Reply::Status(200));
    let bad_url = stack.receiver.script("bad", |_| Reply::Body {
        status: 500,
        body: "boom: see https://h.example/x?token=abc".to_owned(),
    });
    stack
        .put_endpoint("ep-ok", &format!("{ok_url}?token=s3cr3t"), None)
        .await;
    stack.put_endpoint("ep-bad", &bad_url, Some("acme")).await;
    let shutdown = CancellationToken::new();
    let running = stack.start(stack.dispatcher_config(), &shutdown).await;
    for n in 0..4 {
        stack.publish("ep-ok", n).await;
    }
    for n in 0..2 {
        stack.publish("ep-bad", n).await;
    }
    // Each bad event: attempt 1 fails, a retry, attempt 2 fails, parked.
    wait_until(DEADLINE, "the receivers' requests", || async {
        (stack.receiver.count("ok") == 4 && stack.receiver.count("bad") == 4).then_some(())
    })
    .await;

    let insight = stack.insight(InsightConfig::default());
    let page = wait_until(
        DEADLINE,
        "the attempt log's records on the page",
        || async {
            let page = insight.endpoints(None).await.expect("endpoints page");
            let done = row(&page, "ep-ok").is_some_and(|r| r.health.attempts == 4)
                && row(&page, "ep-bad")
                    .is_some_and(|r| r.health.attempts == 4 && r.health.parked == 2);
            done.then_some(page)
        },
    )
    .await;
    let ok = row(&page, "ep-ok").expect("ep-ok");
    assert_eq!(ok.state, EndpointState::Enabled);
    assert_eq!(ok.url, format!("{ok_url}?token=redacted"));
    assert_eq!(ok.health.succeeded, 4);
    assert_eq!(ok.health.success_ratio, Some(1.0));
    assert!(ok.health.last_error.is_none());
    let (p50, p95) = (ok.health.latency_p50_ms, ok.health.latency_p95_ms);
    assert!(p50.is_some() && p50 <= p95, "{p50:?} {p95:?}");

    let bad = row(&page, "ep-bad").expect("ep-bad");
    assert_eq!(bad.health.success_ratio, Some(0.0));
    let last = bad.health.last_error.as_ref().expect("a last error");
    assert_eq!(last.http_status, Some(500));
    assert_eq!(last.attempt, 2);
    let excerpt = last.response_excerpt.as_deref().unwrap_or_default();
    assert!(excerpt.starts_with("boom"), "{excerpt}");
    assert!(
        !excerpt.contains("abc"),
        "the excerpt's URL is redacted: {excerpt}"
    );
    // Grouped by tenant: the endpoint without one first, then acme's.
    let tenants: Vec<Option<&str>> = page.tenants.iter().map(|t| t.tenant.as_deref()).collect();
    assert_eq!(tenants, [None, Some("acme")]);
    let acme = insight.endpoints(Some("acme")).await.expect("acme's page");
    assert_eq!(acme.tenants.len(), 1);
    assert_eq!(acme.tenants[0].endpoints.len(), 1);
    assert_eq!(acme.tenants[0].endpoints[0].id, "ep-bad");
    assert!(!page.attempts.truncated);

    let overview: Overview = wait_until(DEADLINE, "the overview's counts", || async {
        let overview = insight.overview().await.expect("overview");
        (overview.totals.parked == 2 && overview.dlq_inflow_total == 2).then_some(overview)
    })
    .await;
    let totals = overview.totals;
    assert_eq!(
        (
            totals.succeeded,
            totals.failed,
            totals.retried,
            totals.parked
        ),
        (4, 4, 2, 2),
        "{totals:?}"
    );
    assert_eq!(overview.minutes.len(), 60);
    let per_minute: u64 = overview
        .minutes
        .iter()
        .map(|m| m.deliveries.succeeded)
        .sum();
    assert_eq!(per_minute, 4);
    assert_eq!(overview.dlq.topic, stack.topics.dlq);
    stop(running, &shutdown).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_disabled_endpoint_shows_its_reason_and_who_and_enabling_restores_it() {
    let stack = Stack::new("insight-disable").await;
    let url = stack.receiver.script("ok", |_| Reply::Status(200));
    stack.put_endpoint("ep-1", &url, Some("acme")).await;
    let insight = stack.insight(InsightConfig::default());

    let off = insight
        .disable_endpoint("ep-1", Some("INC-42"), "alice")
        .await
        .expect("disabled");
    assert!(off.written);
    let page = insight.endpoints(Some("acme")).await.expect("page");
    let state = &row(&page, "ep-1").expect("ep-1").state;
    match state {
        EndpointState::Disabled { reason, at_ms } => {
            assert_eq!(reason.as_deref(), Some("manual by alice: INC-42"));
            assert!(at_ms.is_some());
        }
        other => panic!("expected disabled, got {other:?}"),
    }
    // The table holds what the CLI's listing shows.
    let stored = stack.store.get("ep-1").await.expect("read").expect("ep-1");
    assert_eq!(
        stored.disabled_reason.as_deref(),
        Some("manual by alice: INC-42")
    );

    let on = insight.enable_endpoint("ep-1").await.expect("enabled");
    assert!(on.written);
    let page = insight.endpoints(None).await.expect("page");
    assert_eq!(
        row(&page, "ep-1").expect("ep-1").state,
        EndpointState::Enabled
    );
    // Idempotent, as the CLI is.
    assert!(
        !insight
            .enable_endpoint("ep-1")
            .await
            .expect("again")
            .written
    );
    // An unknown endpoint and a bad reason are refused, nothing written.
    assert!(insight.enable_endpoint("nope").await.is_err());
    assert!(
        insight
            .disable_endpoint("ep-1", Some("a\nb"), "alice")
            .await
            .is_err()
    );
    assert!(
        stack
            .store
            .get("ep-1")
            .await
            .expect("read")
            .expect("ep-1")
            .enabled
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lag_is_positive_with_a_backlog_and_falls_to_zero_once_drained() {
    let stack = Stack::new("insight-lag").await;
    let url = stack.receiver.script("ok", |_| Reply::Status(200));
    stack.put_endpoint("ep-1", &url, None).await;
    let insight = stack.insight(InsightConfig::default());

    // The group commits once, then stops: what is published next is its backlog.
    let shutdown = CancellationToken::new();
    let running = stack.start(stack.dispatcher_config(), &shutdown).await;
    stack.publish("ep-1", 0).await;
    wait_until(DEADLINE, "the first delivery committed", || async {
        let lag = insight.lag().await.expect("lag");
        let events = lag.topics.iter().find(|t| t.topic == stack.topics.events)?;
        (stack.receiver.count("ok") == 1 && events.uncommitted_partitions < 2 && lag.total == 0)
            .then_some(())
    })
    .await;
    stop(running, &shutdown).await;

    for n in 1..=5 {
        stack.publish("ep-1", n).await;
    }
    let lag = insight.lag().await.expect("lag");
    assert_eq!(lag.total, 5, "{lag:?}");
    let topics: Vec<&str> = lag.topics.iter().map(|t| t.topic.as_str()).collect();
    assert_eq!(
        topics,
        [
            stack.topics.events.as_str(),
            stack.topics.tier_topic("200ms").as_str(),
            stack.topics.tier_topic("1s").as_str(),
            stack.topics.fanout.as_str(),
        ]
    );
    assert_eq!(lag.topics[0].lag, 5);
    assert_eq!(lag.topics[3].group, format!("{}.fanout", stack.group));

    let shutdown = CancellationToken::new();
    let running = stack.start(stack.dispatcher_config(), &shutdown).await;
    wait_until(DEADLINE, "the backlog drained", || async {
        let lag = insight.lag().await.expect("lag");
        (stack.receiver.count("ok") == 6 && lag.topics[0].lag == 0).then_some(())
    })
    .await;
    stop(running, &shutdown).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_open_circuit_shows_from_the_metrics_and_from_the_attempt_log() {
    let stack = Stack::new("insight-circuit").await;
    let bad_url = stack.receiver.script("bad", |_| Reply::Status(500));
    let ok_url = stack.receiver.script("ok", |_| Reply::Status(200));
    stack.put_endpoint("ep-bad", &bad_url, None).await;
    stack.put_endpoint("ep-ok", &ok_url, None).await;
    let mut config = stack.dispatcher_config();
    config.retry.max_attempts = 50;
    config.breaker.minimum_requests = 3;
    config.breaker.failure_rate_percent = 50;
    config.breaker.window_ms = 30_000;
    config.breaker.open_ms = 120_000;
    let shutdown = CancellationToken::new();
    let running = stack.start(config, &shutdown).await;
    let admin = running.admin_addr().expect("an admin port");
    for n in 0..6 {
        stack.publish("ep-bad", n).await;
    }
    stack.publish("ep-ok", 0).await;

    let metrics_url = format!("http://{admin}/metrics");
    let scraped = stack.insight(InsightConfig {
        dispatcher_metrics_urls: vec![metrics_url.clone(), "http://127.0.0.1:1/metrics".to_owned()],
        ..InsightConfig::default()
    });
    let page = wait_until(DEADLINE, "the open circuit on the page", || async {
        let page = scraped.endpoints(None).await.expect("page");
        row(&page, "ep-bad")
            .is_some_and(|r| r.circuit == Some(CircuitState::Open))
            .then_some(page)
    })
    .await;
    assert_eq!(page.circuits.source, CircuitSource::Metrics);
    assert_eq!(
        row(&page, "ep-bad").expect("ep-bad").state,
        EndpointState::CircuitOpen {
            circuit: CircuitState::Open
        }
    );
    assert_eq!(row(&page, "ep-ok").expect("ep-ok").circuit, None);
    assert_eq!(page.circuits.scrapes.len(), 2);
    assert_eq!(page.circuits.scrapes[0].error, None);
    assert_eq!(
        page.circuits.scrapes[1].error.as_deref(),
        Some("could not connect")
    );

    // Without metrics URLs: the attempt log's circuit_open deferrals say the same.
    let logged = stack.insight(InsightConfig::default());
    let page = wait_until(
        DEADLINE,
        "a circuit_open deferral in the attempt log",
        || async {
            let page = logged.endpoints(None).await.expect("page");
            row(&page, "ep-bad")
                .is_some_and(|r| r.circuit == Some(CircuitState::Open) && r.health.deferred > 0)
                .then_some(page)
        },
    )
    .await;
    assert_eq!(page.circuits.source, CircuitSource::AttemptLog);
    assert_eq!(row(&page, "ep-ok").expect("ep-ok").circuit, None);
    let overview = scraped.overview().await.expect("overview");
    assert_eq!(
        overview.circuits.state_of("ep-bad"),
        Some(CircuitState::Open)
    );
    assert!(overview.totals.deferred > 0, "{:?}", overview.totals);
    stop(running, &shutdown).await;
}
