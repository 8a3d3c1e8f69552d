//! hookline itself delivering to a receiver behind the layer, with forced duplicates: each
//! event published twice under one event id, and a handler that fails the first time.
//! The handler completes once per event id, and hookline records every copy a success;
//! with the Redis store and with the PostgreSQL one.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use hookline_core::WebhookEvent;
use hookline_core::secret::Secret;
use hookline_dispatcher::{DispatcherConfig, start};
use hookline_receiver::{
    DedupStore, ReceiverConfig, RedisStore, RedisStoreSettings, Verified, WebhookLayer,
};
use hookline_testkit::{
    TestTopics, kafka_settings, read_all, registry_settings, unique_name, wait_until,
};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio_util::sync::CancellationToken;

use crate::support::SECRET;
use hookline_testkit::RedisServer;

const DEADLINE: Duration = Duration::from_secs(60);
const SUCCEEDED: &str = r#"webhook_delivery_total{status="succeeded"}"#;

/// Per event id: how often the handler was called, and how often it completed.
#[derive(Default)]
struct Runs {
    calls: HashMap<String, usize>,
    completed: HashMap<String, usize>,
}

/// The application's handler: fails its first call for each id (as a flaky database
/// would), completes the others.
async fn handler(runs: Arc<Mutex<Runs>>, verified: Verified, _body: Bytes) -> StatusCode {
    let Ok(mut runs) = runs.lock() else {
        return StatusCode::INTERNAL_SERVER_ERROR;
    };
    let calls = runs.calls.entry(verified.id.clone()).or_default();
    *calls += 1;
    if *calls == 1 {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    *runs.completed.entry(verified.id).or_default() += 1;
    StatusCode::OK
}

fn event(endpoint: &str, n: usize) -> WebhookEvent {
    WebhookEvent {
        event_id: format!("evt-{}-{n}", unique_name("rcv")),
        event_type: "invoice.paid".to_owned(),
        endpoint_id: Some(endpoint.to_owned()),
        tenant_id: None,
        channels: Vec::new(),
        endpoint_url: None,
        payload: format!(r#"{{"invoice":{n}}}"#).into_bytes(),
        content_type: "application/json".to_owned(),
        headers: BTreeMap::new(),
        created_at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        expires_at_ms: None,
    }
}

fn metric(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hookline_delivers_duplicates_and_retries_and_the_handler_completes_once_per_id() {
    let redis = RedisServer::start().await;
    let mut store_settings = RedisStoreSettings::new(Secret::new(redis.url()));
    store_settings.timeout = Duration::from_millis(500);
    let store = RedisStore::connect(store_settings).await.expect("store");
    let events = deliver_duplicates(store).await;
    for event in &events {
        let key = format!("hookline:receiver:{}", event.event_id);
        let value: Option<String> = redis.query(redis::cmd("GET").arg(&key)).await;
        assert_eq!(value.as_deref(), Some("succeeded"), "{key}");
    }
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hookline_delivers_duplicates_to_a_postgres_backed_receiver_that_runs_each_once() {
    let schema = format!(
        "t_rcv_dispatch_{}_{:x}",
        std::process::id(),
        rand::random::<u32>()
    );
    let mut store_settings =
        hookline_receiver::PgStoreSettings::new(Secret::new(hookline_testkit::postgres_url()));
    store_settings.schema = schema.clone();
    store_settings.receiver = "dispatch-test".to_owned();
    let store = hookline_receiver::PgStore::connect(store_settings)
        .await
        .expect("store");
    let events = deliver_duplicates(store).await;
    let pool = sqlx::PgPool::connect(&hookline_testkit::postgres_url())
        .await
        .expect("connect");
    for event in &events {
        let row: (String, i32) = sqlx::query_as(&format!(
            "SELECT status, attempts FROM {schema}.hookline_received \
             WHERE receiver = 'dispatch-test' AND webhook_id = $1"
        ))
        .bind(&event.event_id)
        .fetch_one(&pool)
        .await
        .expect("a row per event");
        // Two claims won: the failed first call and the completed retry.
        assert_eq!(row, ("Succeeded".to_owned(), 2), "{}", event.event_id);
    }
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&pool)
        .await
        .expect("drop schema");
}

/// Runs the scenario against a receiver over `store`; the events it published.
async fn deliver_duplicates<D: DedupStore>(store: D) -> Vec<WebhookEvent> {
    let settings = ReceiverConfig::with_secrets([Secret::new(SECRET)])
        .into_settings()
        .expect("valid");
    let runs = Arc::new(Mutex::new(Runs::default()));
    let app = Router::new()
        .route(
            "/hook",
            post({
                let runs = runs.clone();
                move |verified: Verified, body: Bytes| handler(runs.clone(), verified, body)
            }),
        )
        .layer(WebhookLayer::new(settings, store));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let server_stop = CancellationToken::new();
    let server = tokio::spawn({
        let stop = server_stop.clone();
        async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
        }
    });

    let kafka = kafka_settings();
    let topics = TestTopics::new("receiver-dups", &["200ms", "500ms", "1s"]);
    topics.create(&kafka, 2).await;
    let producer: FutureProducer = kafka.producer_config().create().expect("producer");
    let endpoint = serde_json::json!({ "url": url, "secrets": [SECRET] }).to_string();
    producer
        .send(
            FutureRecord::to(&topics.endpoints)
                .key("ep-rcv")
                .payload(&endpoint),
            DEADLINE,
        )
        .await
        .expect("endpoint written");

    let mut config = DispatcherConfig {
        kafka: kafka.clone(),
        registry: registry_settings(),
        group_id: unique_name("dispatchers"),
        ..DispatcherConfig::default()
    };
    config.topics.events = topics.events.clone();
    config.topics.endpoints = topics.endpoints.clone();
    config.topics.retry_tiers = topics.tiers.clone();
    config.retry.strategy = hookline_core::policy::StrategyKind::Fixed;
    config.retry.base_ms = 300;
    config.retry.cap_ms = 300;
    config.retry.max_attempts = 5;
    // A copy arriving while the first is processed gets 409: hookline retries it by
    // default, no [status] setting needed.
    config.outbound.allow_loopback = true;
    config.admin.listen = "127.0.0.1:0".to_owned();
    config.http.timeout_ms = 2_000;
    config.fanout.enabled = false;
    let shutdown = CancellationToken::new();
    let running = start(config.into_settings().expect("config"), shutdown.clone())
        .await
        .expect("dispatcher starts");

    // Each event twice, under its one event id, as a producer's retried send would.
    let events: Vec<WebhookEvent> = (0..3).map(|n| event("ep-rcv", n)).collect();
    for copy in 0..2 {
        for event in &events {
            let value = event.to_json();
            let headers = OwnedHeaders::new().insert(Header {
                key: "webhook-id",
                value: Some(event.event_id.as_str()),
            });
            producer
                .send(
                    FutureRecord::to(&topics.events)
                        .key("ep-rcv")
                        .payload(&value)
                        .headers(headers),
                    DEADLINE,
                )
                .await
                .unwrap_or_else(|_| panic!("copy {copy} written"));
        }
    }

    // Every record ends in a 2xx: the first copy after its retry, the second at once or
    // after a 409.
    let records = events.len() as u64 * 2;
    wait_until(DEADLINE, "every copy delivered with a 2xx", || async {
        (metric(&running.metrics().encode(), SUCCEEDED) >= records).then_some(())
    })
    .await;
    let metrics = running.metrics().encode();
    assert_eq!(metric(&metrics, SUCCEEDED), records, "{metrics}");
    assert_eq!(
        metric(&metrics, r#"webhook_delivery_total{status="dlq"}"#),
        0,
        "{metrics}"
    );
    // The one failure per event is the handler's; a 409 (a copy that came while the first
    // was processed) is retried too.
    assert_eq!(
        metric(&metrics, r#"webhook_attempts_total{outcome="http_5xx"}"#),
        events.len() as u64,
        "{metrics}"
    );

    {
        let runs = runs.lock().expect("runs");
        for event in &events {
            let id = &event.event_id;
            assert_eq!(runs.completed.get(id), Some(&1), "{id} completed once");
            assert_eq!(
                runs.calls.get(id),
                Some(&2),
                "{id}: one failure, one completion"
            );
        }
    }
    assert!(
        read_all(&kafka, &topics.dlq, 0, DEADLINE).await.is_empty(),
        "nothing parked"
    );

    shutdown.cancel();
    running.wait().await.expect("clean stop");
    server_stop.cancel();
    let _ = server.await;
    events
}
