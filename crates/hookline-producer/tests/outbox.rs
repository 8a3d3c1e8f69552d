//! The transactional outbox against the real PostgreSQL and Kafka: the event commits with
//! the business change or not at all; a broker stopped for 20 s loses and doubles nothing;
//! two relays on one table never publish a task twice.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_core::secret::Secret;
use hookline_kafka::{KafkaSettings, TopicSpec, ensure_topics};
use hookline_producer::outbox::{OutboxConfig, OutboxStore, Relay, enqueue_in};
use hookline_producer::{Encoding, Publisher, PublisherConfig};
use hookline_testkit::{
    PrivateKafka, kafka_settings, postgres_url, read_all, unique_name, wait_until,
};
use rdkafka::message::{Headers, Message, OwnedMessage};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(60);

/// A PostgreSQL schema of the test's own, with the outbox table and a business table.
struct Db {
    pool: PgPool,
    schema: String,
}

impl Db {
    async fn new(test: &str) -> Db {
        let schema = format!(
            "t_{test}_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let pool = PgPool::connect(&postgres_url()).await.expect("PostgreSQL");
        let db = Db { pool, schema };
        OutboxStore::new(&db.config().store_settings().expect("settings"))
            .expect("store")
            .migrate()
            .await
            .expect("migrated");
        sqlx::query(&format!(
            "CREATE TABLE {}.orders (id BIGINT PRIMARY KEY, total INTEGER NOT NULL)",
            db.schema
        ))
        .execute(&db.pool)
        .await
        .expect("the business table");
        db
    }

    fn config(&self) -> OutboxConfig {
        OutboxConfig {
            postgres_url: Some(Secret::new(postgres_url())),
            schema: self.schema.clone(),
            poll_interval_ms: 200,
            backoff_base_ms: 200,
            backoff_max_ms: 2_000,
            maintenance_interval_ms: 500,
            retry_base_ms: 100,
            ..OutboxConfig::default()
        }
    }

    async fn count(&self, status: &str) -> i64 {
        sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {}.hookline_outbox WHERE status = $1",
            self.schema
        ))
        .bind(status)
        .fetch_one(&self.pool)
        .await
        .expect("count")
    }

    async fn drop(self) {
        sqlx::query(&format!("DROP SCHEMA {} CASCADE", self.schema))
            .execute(&self.pool)
            .await
            .expect("drop the schema");
    }
}

fn event(endpoint: &str, n: usize) -> WebhookEvent {
    WebhookEvent {
        event_id: String::new(),
        event_type: "order.created".into(),
        endpoint_id: Some(endpoint.into()),
        tenant_id: None,
        channels: Vec::new(),
        endpoint_url: None,
        payload: format!(r#"{{"order":{n}}}"#).into_bytes(),
        content_type: "application/json".into(),
        headers: BTreeMap::new(),
        created_at_ms: 0,
        expires_at_ms: None,
    }
}

/// An order and its event, in one transaction.
async fn place_order(db: &Db, n: usize, commit: bool) -> uuid::Uuid {
    let mut tx = db.pool.begin().await.expect("begin");
    sqlx::query(&format!("INSERT INTO {}.orders VALUES ($1, 42)", db.schema))
        .bind(i64::try_from(n).expect("small"))
        .execute(&mut *tx)
        .await
        .expect("the order");
    let id = enqueue_in(&mut tx, &db.schema, &event("ep_orders", n))
        .await
        .expect("enqueued");
    if commit {
        tx.commit().await.expect("commit");
    } else {
        tx.rollback().await.expect("rollback");
    }
    id
}

async fn topic(settings: &KafkaSettings, partitions: i32) -> String {
    let topic = unique_name("outbox");
    ensure_topics(settings, &[TopicSpec::new(&topic, partitions, 1)])
        .await
        .expect("the topic");
    topic
}

fn relay(db: &Db, config: OutboxConfig, kafka: &KafkaSettings, topic: &str) -> Arc<Relay> {
    let publisher = Publisher::new(kafka, None, PublisherConfig::new(topic, Encoding::Json))
        .expect("publisher");
    let settings = config.into_settings().expect("settings");
    let _ = db;
    Arc::new(Relay::new(settings, Arc::new(publisher)).expect("relay"))
}

fn start(relay: &Arc<Relay>, shutdown: &CancellationToken) -> tokio::task::JoinHandle<()> {
    let relay = relay.clone();
    let shutdown = shutdown.clone();
    tokio::spawn(async move { relay.run(shutdown).await })
}

fn webhook_id(message: &OwnedMessage) -> String {
    let header = message
        .headers()
        .and_then(|headers| headers.iter().find(|h| h.key == "webhook-id"))
        .and_then(|h| h.value)
        .expect("a webhook-id header");
    String::from_utf8_lossy(header).into_owned()
}

/// Records per webhook-id, each record's value checked to be the event of that id.
fn per_id(records: &[OwnedMessage]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for record in records {
        let id = webhook_id(record);
        let event =
            WebhookEvent::from_json(record.payload().expect("a value")).expect("JSON event");
        assert_eq!(event.event_id, id, "the value's event id is the header's");
        assert_eq!(record.key(), Some(&b"ep_orders"[..]));
        *counts.entry(id).or_insert(0) += 1;
    }
    counts
}

#[tokio::test]
async fn the_event_commits_with_the_business_change_or_not_at_all() {
    let db = Db::new("outbox_tx").await;
    let kafka = kafka_settings();
    let topic = topic(&kafka, 1).await;
    let committed = place_order(&db, 1, true).await;
    let rolled_back = place_order(&db, 2, false).await;

    let shutdown = CancellationToken::new();
    let relay = relay(&db, db.config(), &kafka, &topic);
    let running = start(&relay, &shutdown);
    wait_until(DEADLINE, "the committed task COMPLETE", || async {
        (db.count("COMPLETE").await == 1).then_some(())
    })
    .await;
    let records = read_all(&kafka, &topic, 1, DEADLINE).await;
    assert_eq!(records.len(), 1, "only the committed event is published");
    assert_eq!(webhook_id(&records[0]), committed.to_string());
    let event = WebhookEvent::from_json(records[0].payload().expect("value")).expect("event");
    assert_eq!(
        event.payload, br#"{"order":1}"#,
        "the payload bytes as enqueued"
    );

    let rows: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {s}.hookline_outbox WHERE id = $1::uuid",
        s = db.schema
    ))
    .bind(rolled_back.to_string())
    .fetch_one(&db.pool)
    .await
    .expect("count");
    assert_eq!(rows, 0, "no task for the rolled-back transaction");
    let orders: Vec<i64> = sqlx::query_scalar(&format!("SELECT id FROM {}.orders", db.schema))
        .fetch_all(&db.pool)
        .await
        .expect("orders");
    assert_eq!(orders, [1]);
    assert_eq!(relay.metrics().published.get(), 1);
    shutdown.cancel();
    running.await.expect("the relay stops");
    db.drop().await;
}

#[tokio::test]
async fn kafka_down_for_20_s_while_tasks_are_enqueued_then_every_task_once() {
    let db = Db::new("outbox_down").await;
    let broker = PrivateKafka::start().await;
    let kafka = broker.settings();
    let topic = topic(&kafka, 3).await;
    let shutdown = CancellationToken::new();
    let relay = relay(&db, db.config(), &kafka, &topic);
    let running = start(&relay, &shutdown);
    let before = place_order(&db, 0, true).await;
    wait_until(DEADLINE, "the first task COMPLETE", || async {
        (db.count("COMPLETE").await == 1).then_some(())
    })
    .await;

    broker.stop().await;
    let down_since = tokio::time::Instant::now();
    let mut ids = vec![before];
    // Tasks enqueued all through the outage.
    for n in 1..=40 {
        ids.push(place_order(&db, n, true).await);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(down_since.elapsed() >= Duration::from_secs(20));
    assert_eq!(db.count("FAILED").await, 0, "an outage burns no retries");
    broker.resume().await;

    wait_until(Duration::from_secs(120), "every task COMPLETE", || async {
        (db.count("COMPLETE").await == 41).then_some(())
    })
    .await;
    let records = read_all(&kafka, &topic, 41, DEADLINE).await;
    let counts = per_id(&records);
    for id in &ids {
        assert_eq!(
            counts.get(&id.to_string()),
            Some(&1),
            "task {id} published once"
        );
    }
    assert_eq!(records.len(), 41, "nothing else on the topic");
    let retried: i64 = sqlx::query_scalar(&format!(
        "SELECT COALESCE(max(retry_count), 0)::bigint FROM {}.hookline_outbox",
        db.schema
    ))
    .fetch_one(&db.pool)
    .await
    .expect("retries");
    assert_eq!(retried, 0, "Kafka being down is not the tasks' fault");
    shutdown.cancel();
    running.await.expect("the relay stops");
    db.drop().await;
}

#[tokio::test]
async fn two_relays_on_one_table_never_publish_a_task_twice() {
    let db = Db::new("outbox_two").await;
    let kafka = kafka_settings();
    let topic = topic(&kafka, 3).await;
    let config = OutboxConfig {
        batch_size: 5,
        concurrency: 2,
        ..db.config()
    };
    let shutdown = CancellationToken::new();
    let a = relay(
        &db,
        OutboxConfig {
            relay_id: Some("relay-a".into()),
            ..config.clone()
        },
        &kafka,
        &topic,
    );
    let b = relay(
        &db,
        OutboxConfig {
            relay_id: Some("relay-b".into()),
            ..config
        },
        &kafka,
        &topic,
    );
    let running = [start(&a, &shutdown), start(&b, &shutdown)];
    let mut ids = Vec::new();
    for n in 0..200 {
        ids.push(place_order(&db, n, true).await);
    }
    wait_until(Duration::from_secs(120), "every task COMPLETE", || async {
        (db.count("COMPLETE").await == 200).then_some(())
    })
    .await;
    let records = read_all(&kafka, &topic, 200, DEADLINE).await;
    let counts = per_id(&records);
    assert_eq!(records.len(), 200, "no record twice");
    for id in &ids {
        assert_eq!(
            counts.get(&id.to_string()),
            Some(&1),
            "task {id} published once"
        );
    }
    let (by_a, by_b) = (a.metrics().published.get(), b.metrics().published.get());
    assert_eq!(by_a + by_b, 200);
    shutdown.cancel();
    for handle in running {
        handle.await.expect("a relay stops");
    }
    db.drop().await;
}
