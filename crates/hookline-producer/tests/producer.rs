//! End-to-end tests of the producer crate against the real local stack (`deploy/local/stack
//! up`): publishing in both encodings, refusing invalid events, provisioning, and the
//! endpoint table.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hookline_core::WebhookEvent;
use hookline_core::endpoint::EndpointConfig;
use hookline_core::policy::RetryTiers;
use hookline_kafka::{KafkaSettings, Registry, TopicSpec, ensure_topics};
use hookline_producer::{
    Encoding, EndpointStore, EndpointStoreError, PublishError, Publisher, PublisherConfig, PutIf,
    Topics, TopicsPlan, provision,
};
use hookline_testkit::{kafka_settings, read_all, registry_settings, unique_name};
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message, OwnedMessage};

const DEADLINE: Duration = Duration::from_secs(30);

fn event(endpoint: &str) -> WebhookEvent {
    WebhookEvent {
        event_id: String::new(),
        event_type: "invoice.paid".into(),
        endpoint_id: Some(endpoint.into()),
        tenant_id: None,
        channels: Vec::new(),
        endpoint_url: Some("https://example.com/hooks".into()),
        payload: br#"{"amount":42,"currency":"EUR"}"#.to_vec(),
        content_type: "application/json".into(),
        headers: BTreeMap::from([("X-Tenant".to_owned(), "acme".to_owned())]),
        created_at_ms: 0,
        expires_at_ms: None,
    }
}

fn now_ms() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(since_epoch.as_millis()).expect("ms fit in i64")
}

async fn events_topic(partitions: i32) -> String {
    let topic = unique_name("producer-events");
    ensure_topics(&kafka_settings(), &[TopicSpec::new(&topic, partitions, 1)])
        .await
        .expect("create the events topic");
    topic
}

/// Reads `topic` from the beginning until it has `count` records (and any that follow).
async fn read(settings: &KafkaSettings, topic: &str, count: usize) -> Vec<OwnedMessage> {
    read_all(settings, topic, count, DEADLINE).await
}

/// How many records `topic` holds, from its watermarks.
fn record_count(settings: &KafkaSettings, topic: &str) -> i64 {
    let consumer: BaseConsumer = settings.client_config().create().expect("consumer");
    let metadata = consumer
        .fetch_metadata(Some(topic), DEADLINE)
        .expect("metadata");
    metadata.topics()[0]
        .partitions()
        .iter()
        .map(|p| {
            let (low, high) = consumer
                .fetch_watermarks(topic, p.id(), DEADLINE)
                .expect("watermarks");
            high - low
        })
        .sum()
}

fn webhook_id(message: &OwnedMessage) -> Option<String> {
    let headers = message.headers()?;
    headers
        .iter()
        .find(|h| h.key == "webhook-id")
        .and_then(|h| h.value)
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

#[tokio::test]
async fn avro_publish_decodes_through_the_registry_to_the_same_event() {
    let settings = kafka_settings();
    let topic = events_topic(3).await;
    let registry = Arc::new(Registry::new(&registry_settings()).expect("registry"));
    let config = PublisherConfig::new(&topic, Encoding::Avro);
    let publisher = Publisher::new(&settings, Some(registry.clone()), config).expect("publisher");

    let before = now_ms();
    let sent = event("ep_avro");
    let delivered = publisher.publish(&sent).await.expect("published");
    assert!(
        uuid::Uuid::parse_str(&delivered.event_id).is_ok_and(|id| id.get_version_num() == 7),
        "a generated event id is a UUID v7: {}",
        delivered.event_id
    );

    let records = read(&settings, &topic, 1).await;
    let record = &records[0];
    assert_eq!(
        (record.partition(), record.offset()),
        (delivered.partition, delivered.offset)
    );
    assert_eq!(record.key(), Some(&b"ep_avro"[..]));
    assert_eq!(
        webhook_id(record).as_deref(),
        Some(delivered.event_id.as_str())
    );
    let value = registry
        .decode(record.payload().expect("a value"))
        .await
        .expect("decodes through the registry");
    let received = WebhookEvent::from_avro_value(value).expect("a WebhookEvent");
    assert!((before..=now_ms()).contains(&received.created_at_ms));
    let expected = WebhookEvent {
        event_id: delivered.event_id.clone(),
        created_at_ms: received.created_at_ms,
        ..sent
    };
    assert_eq!(received, expected);
}

#[tokio::test]
async fn json_publish_many_reads_back_with_from_json() {
    let settings = kafka_settings();
    let topic = events_topic(2).await;
    let config = PublisherConfig::new(&topic, Encoding::Json);
    let publisher = Publisher::new(&settings, None, config).expect("publisher");

    let sent: Vec<WebhookEvent> = (0..5)
        .map(|i| WebhookEvent {
            event_id: format!("evt_{i}"),
            created_at_ms: 1_700_000_000_000 + i,
            expires_at_ms: None,
            ..event(&format!("ep_{}", i % 2))
        })
        .collect();
    let results = publisher.publish_many(&sent, 3).await;
    let ids: Vec<String> = results
        .into_iter()
        .map(|r| r.expect("published").event_id)
        .collect();
    assert_eq!(ids, ["evt_0", "evt_1", "evt_2", "evt_3", "evt_4"]);
    publisher.flush(DEADLINE).await.expect("flushed");

    let mut received: Vec<WebhookEvent> = read(&settings, &topic, 5)
        .await
        .iter()
        .map(|record| {
            let event = WebhookEvent::from_json(record.payload().expect("a value")).expect("JSON");
            assert_eq!(
                record.key().map(<[u8]>::to_vec),
                event.endpoint_id.clone().map(String::into_bytes)
            );
            assert_eq!(webhook_id(record).as_deref(), Some(event.event_id.as_str()));
            event
        })
        .collect();
    received.sort_by(|a, b| a.event_id.cmp(&b.event_id));
    assert_eq!(received, sent);
}

#[tokio::test]
async fn an_invalid_event_is_refused_before_anything_is_sent() {
    let settings = kafka_settings();
    let topic = events_topic(1).await;
    let config = PublisherConfig::new(&topic, Encoding::Json);
    let publisher = Publisher::new(&settings, None, config).expect("publisher");

    let mut bad = event("ep_1");
    bad.headers
        .insert("webhook-signature".into(), "forged".into());
    let error = publisher.publish(&bad).await.expect_err("refused");
    assert!(matches!(error, PublishError::Invalid { .. }), "{error:?}");
    assert!(error.is_invalid_event());
    let empty_type = WebhookEvent {
        event_type: String::new(),
        ..event("ep_1")
    };
    let error = publisher.publish(&empty_type).await.expect_err("refused");
    assert!(matches!(error, PublishError::Invalid { .. }), "{error:?}");
    publisher.flush(DEADLINE).await.expect("flushed");
    assert_eq!(record_count(&settings, &topic), 0);

    let avro_without_registry = Publisher::new(
        &settings,
        None,
        PublisherConfig::new(&topic, Encoding::Avro),
    );
    assert!(matches!(
        avro_without_registry,
        Err(PublishError::RegistryRequired)
    ));
}

async fn topic_config(settings: &KafkaSettings, topic: &str, key: &str) -> Option<String> {
    let admin: AdminClient<DefaultClientContext> =
        settings.client_config().create().expect("admin client");
    let results = admin
        .describe_configs([&ResourceSpecifier::Topic(topic)], &AdminOptions::new())
        .await
        .expect("describe configs");
    let resource = results
        .into_iter()
        .next()
        .expect("one result")
        .expect("the topic's configs");
    resource.get(key).and_then(|entry| entry.value.clone())
}

#[tokio::test]
async fn provisioning_creates_the_topics_with_their_configs_and_is_idempotent() {
    let settings = kafka_settings();
    let topics = Topics::new(unique_name("prov-events"), unique_name("prov-endpoints"));
    let plan = TopicsPlan {
        tiers: RetryTiers::from_suffixes(&["200ms", "5s"]).expect("tiers"),
        partitions: 2,
        ..TopicsPlan::new(topics.clone())
    };
    let expected = [
        topics.events.clone(),
        topics.fanout(),
        format!("{}.retry.200ms", topics.events),
        format!("{}.retry.5s", topics.events),
        topics.lane(),
        topics.dlq(),
        topics.attempts(),
        topics.dlq_actions(),
        topics.endpoints.clone(),
        topics.cancellations(),
    ];

    let first = provision(&settings, &plan).await.expect("provisioned");
    let mut created = first.created.clone();
    created.sort();
    let mut all = expected.to_vec();
    all.sort();
    assert_eq!(created, all);
    assert!(first.existing.is_empty());

    let consumer: BaseConsumer = settings.client_config().create().expect("consumer");
    for name in &expected[..6] {
        let metadata = consumer
            .fetch_metadata(Some(name), DEADLINE)
            .expect("metadata");
        assert_eq!(metadata.topics()[0].partitions().len(), 2, "{name}");
    }
    let config = |topic: &str, key: &'static str| {
        let settings = settings.clone();
        let topic = topic.to_owned();
        async move { topic_config(&settings, &topic, key).await }
    };
    assert_eq!(
        config(&topics.endpoints, "cleanup.policy").await.as_deref(),
        Some("compact")
    );
    assert_eq!(
        config(&topics.dlq_actions(), "cleanup.policy")
            .await
            .as_deref(),
        Some("compact")
    );
    assert_eq!(
        config(&topics.events, "cleanup.policy").await.as_deref(),
        Some("delete")
    );
    assert_eq!(
        config(&topics.dlq(), "retention.ms").await.as_deref(),
        Some("2592000000")
    );
    assert_eq!(
        config(&topics.fanout(), "retention.ms").await.as_deref(),
        Some("604800000"),
        "tenant events are kept as long as events"
    );
    assert_eq!(
        config(&expected[2], "retention.ms").await.as_deref(),
        Some("259200000")
    );

    let second = provision(&settings, &plan)
        .await
        .expect("provisioned again");
    assert!(second.created.is_empty(), "{second:?}");
    assert_eq!(second.existing, expected);
}

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[tokio::test]
async fn endpoints_put_list_and_remove_round_trip_through_the_compacted_topic() {
    let settings = kafka_settings();
    let topic = unique_name("endpoints");
    let table = TopicSpec::new(&topic, 3, 1).config("cleanup.policy", "compact");
    ensure_topics(&settings, &[table])
        .await
        .expect("create the table");
    let store = EndpointStore::new(&settings, &topic).expect("store");
    assert!(
        store
            .list()
            .await
            .expect("empty table")
            .endpoints
            .is_empty()
    );

    let a1 = EndpointConfig::new("https://a.example/v1", vec![SECRET.into()]);
    let a2 = EndpointConfig {
        max_concurrency: Some(4),
        timeout_ms: Some(5_000),
        ..EndpointConfig::new("https://a.example/v2", vec![SECRET.into()])
    };
    let b = EndpointConfig {
        enabled: false,
        ..EndpointConfig::new("https://b.example/", vec![SECRET.into()])
    };
    store.put("ep_a", &a1).await.expect("put a");
    store.put("ep_b", &b).await.expect("put b");
    store.put("ep_a", &a2).await.expect("replace a");
    let list = store.list().await.expect("list");
    assert_eq!(list.endpoints.keys().collect::<Vec<_>>(), ["ep_a", "ep_b"]);
    assert_eq!(list.endpoints["ep_a"], a2);
    assert_eq!(list.endpoints["ep_b"], b);
    assert_eq!(store.get("ep_b").await.expect("get"), Some(b));

    store.remove("ep_b").await.expect("remove b");
    let list = store.list().await.expect("list");
    assert_eq!(list.endpoints.keys().collect::<Vec<_>>(), ["ep_a"]);
    assert!(list.unreadable.is_empty());
    assert_eq!(store.get("ep_b").await.expect("get"), None);

    // The removal is a tombstone keyed by the id: a null value.
    let records = read(&settings, &topic, 4).await;
    let tombstones: Vec<&OwnedMessage> = records.iter().filter(|m| m.payload().is_none()).collect();
    assert_eq!(tombstones.len(), 1);
    assert_eq!(tombstones[0].key(), Some(&b"ep_b"[..]));
    let value = records
        .iter()
        .find(|m| m.payload().is_some())
        .and_then(|m| m.payload())
        .expect("a value");
    let json: serde_json::Value = serde_json::from_slice(value).expect("JSON value");
    assert!(json.get("url").is_some() && json.get("secrets").is_some());
}

#[tokio::test]
async fn endpoints_refuse_invalid_configs_and_report_a_missing_topic() {
    let settings = kafka_settings();
    let topic = unique_name("endpoints-missing");
    let store = EndpointStore::new(&settings, &topic)
        .expect("store")
        .with_timeout(Duration::from_secs(10));
    let no_secret = EndpointConfig::new("https://a.example/", Vec::new());
    let error = store.put("ep_a", &no_secret).await.expect_err("refused");
    assert!(
        matches!(error, EndpointStoreError::InvalidConfig { .. }),
        "{error:?}"
    );
    let error = store.put("", &no_secret).await.expect_err("refused");
    assert!(
        matches!(error, EndpointStoreError::InvalidId { .. }),
        "{error:?}"
    );
    let error = store.list().await.expect_err("no such topic");
    assert!(
        matches!(error, EndpointStoreError::TopicMissing { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_conditional_write_never_overwrites_a_newer_config() {
    let settings = kafka_settings();
    let topic = unique_name("endpoints");
    let table = TopicSpec::new(&topic, 1, 1).config("cleanup.policy", "compact");
    ensure_topics(&settings, &[table])
        .await
        .expect("create the table");
    let store = EndpointStore::new(&settings, &topic).expect("store");
    let seen = EndpointConfig::new("https://a.example/v1", vec![SECRET.into()]);
    let newer = EndpointConfig {
        description: Some("moved".into()),
        ..EndpointConfig::new("https://a.example/v2", vec![SECRET.into()])
    };
    let disabled = EndpointConfig {
        enabled: false,
        disabled_reason: Some("failing: HTTP 500".into()),
        disabled_at_ms: Some(1),
        ..seen.clone()
    };
    store.put("ep_a", &seen).await.expect("put");
    store.put("ep_a", &newer).await.expect("newer");

    let done = store
        .put_if_current("ep_a", &seen, &disabled)
        .await
        .expect("conditional");
    assert_eq!(done, PutIf::Changed(Some(Box::new(newer.clone()))));
    assert_eq!(store.get("ep_a").await.expect("get"), Some(newer.clone()));

    // On the config it holds, the write goes through; a second one sees it done.
    let disabled_newer = EndpointConfig {
        enabled: false,
        ..newer.clone()
    };
    let done = store
        .put_if_current("ep_a", &newer, &disabled_newer)
        .await
        .expect("conditional");
    assert_eq!(done, PutIf::Written);
    let again = store
        .put_if_current("ep_a", &newer, &disabled_newer)
        .await
        .expect("again");
    assert_eq!(
        again,
        PutIf::Changed(Some(Box::new(disabled_newer.clone())))
    );
    assert_eq!(store.get("ep_a").await.expect("get"), Some(disabled_newer));
}
