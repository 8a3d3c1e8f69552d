//! The end-to-end harness: a test's own topics, a real HTTP receiver, a producer, and a
//! dispatcher started in-process with short retry tiers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_core::envelope::DlqEnvelope;
use hookline_core::schema::WEBHOOK_EVENT_CURRENT;
use hookline_dispatcher::{DispatcherConfig, Running, start};
use hookline_kafka::{KafkaSettings, Registry};
use hookline_testkit::{
    Proxy, Receiver, TestTopics, kafka_settings, read_all, registry_settings, unique_name,
    wait_until,
};
use rdkafka::message::{Header, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio_util::sync::CancellationToken;

pub(crate) const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
pub(crate) const DEADLINE: Duration = Duration::from_secs(60);

pub(crate) struct Harness {
    pub(crate) topics: TestTopics,
    pub(crate) kafka: KafkaSettings,
    pub(crate) registry: Arc<Registry>,
    pub(crate) receiver: Receiver,
    pub(crate) producer: FutureProducer,
    pub(crate) shutdown: CancellationToken,
    pub(crate) running: Option<Running>,
}

impl Harness {
    pub(crate) async fn new(test: &str) -> Harness {
        Harness::with_tiers(test, &["200ms", "500ms", "1s"]).await
    }

    /// [`new`](Self::new) with these retry tiers.
    pub(crate) async fn with_tiers(test: &str, tiers: &[&str]) -> Harness {
        let kafka = kafka_settings();
        let topics = TestTopics::new(test, tiers);
        topics.create(&kafka, 2).await;
        Harness {
            registry: Arc::new(Registry::new(&registry_settings()).expect("registry")),
            receiver: Receiver::start().await,
            producer: kafka.producer_config().create().expect("producer"),
            shutdown: CancellationToken::new(),
            running: None,
            topics,
            kafka,
        }
    }

    /// A configuration for this test: short tiers, fixed 300 ms backoff, 3 attempts.
    pub(crate) fn config(&self) -> DispatcherConfig {
        let mut config = DispatcherConfig {
            kafka: self.kafka.clone(),
            registry: registry_settings(),
            group_id: unique_name("dispatchers"),
            ..DispatcherConfig::default()
        };
        config.topics.events = self.topics.events.clone();
        config.topics.endpoints = self.topics.endpoints.clone();
        config.topics.retry_tiers = self.topics.tiers.clone();
        config.retry.strategy = hookline_core::policy::StrategyKind::Fixed;
        config.retry.base_ms = 300;
        config.retry.cap_ms = 300;
        config.retry.max_attempts = 3;
        config.outbound.allow_loopback = true;
        config.admin.listen = "127.0.0.1:0".to_owned();
        config.shutdown_grace_ms = 5_000;
        config.http.timeout_ms = 2_000;
        // Only the fan-out tests run the fan-out stage (see `fanout_config`).
        config.fanout.enabled = false;
        config
    }

    /// [`config`](Self::config) with the fan-out stage running, as `hookline dispatch` has it
    /// by default.
    pub(crate) fn fanout_config(&self) -> DispatcherConfig {
        let mut config = self.config();
        config.fanout.enabled = true;
        config
    }

    /// Writes many endpoints at once, each signing with [`SECRET`].
    pub(crate) async fn put_endpoints(&self, endpoints: Vec<(String, serde_json::Value)>) {
        let values: Vec<(String, String)> = endpoints
            .into_iter()
            .map(|(id, mut config)| {
                config["secrets"] = serde_json::json!([SECRET]);
                (id, config.to_string())
            })
            .collect();
        let sends = values.iter().map(|(id, value)| {
            self.producer.send(
                FutureRecord::to(&self.topics.endpoints)
                    .key(id.as_str())
                    .payload(value.as_str()),
                DEADLINE,
            )
        });
        for sent in futures::future::join_all(sends).await {
            sent.expect("endpoint written");
        }
    }

    /// Removes an endpoint (a tombstone in the endpoints topic).
    pub(crate) async fn remove_endpoint(&self, id: &str) {
        self.producer
            .send(
                FutureRecord::<str, [u8]>::to(&self.topics.endpoints).key(id),
                DEADLINE,
            )
            .await
            .expect("tombstone written");
    }

    /// Publishes a tenant event (JSON) to the fan-out topic, keyed by its tenant.
    pub(crate) async fn publish_tenant_event(&self, event: &WebhookEvent) {
        let value = event.to_json();
        let record = FutureRecord::to(&self.topics.fanout)
            .key(event.tenant_id.as_deref().unwrap_or_default())
            .payload(&value);
        self.producer
            .send(record, DEADLINE)
            .await
            .expect("tenant event written");
    }

    pub(crate) async fn start(&mut self, config: DispatcherConfig) {
        let settings = config.into_settings().expect("valid test config");
        self.running = Some(
            start(settings, self.shutdown.clone())
                .await
                .expect("dispatcher starts"),
        );
    }

    pub(crate) async fn stop(&mut self) {
        self.shutdown.cancel();
        if let Some(running) = self.running.take() {
            running.wait().await.expect("clean stop");
        }
        self.shutdown = CancellationToken::new();
    }

    /// A proxy in front of the real registry, and this test's config reaching the registry
    /// through it with a 1 s timeout: `proxy.set_down()` is then a registry outage.
    pub(crate) async fn config_behind_registry_proxy(&self) -> (DispatcherConfig, Proxy) {
        let target = registry_settings()
            .url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .and_then(|host| host.parse().ok())
            .expect("the registry URL is http://<ip>:<port>/...");
        let proxy = Proxy::start(target).await;
        let mut config = self.config();
        config.registry.url = format!("http://{}/apis/ccompat/v7", proxy.addr());
        config.registry.timeout_ms = 1_000;
        (config, proxy)
    }

    /// The offset `group` committed for `partition` of the main topic, if any.
    pub(crate) fn committed(&self, group: &str, partition: i32) -> Option<i64> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let mut config = self.kafka.client_config();
        config
            .set("group.id", group)
            .set("enable.auto.commit", "false");
        let consumer: BaseConsumer = config.create().expect("consumer");
        let mut list = rdkafka::TopicPartitionList::new();
        list.add_partition(&self.topics.events, partition);
        let committed = consumer
            .committed_offsets(list, Duration::from_secs(10))
            .expect("committed");
        match committed.elements()[0].offset() {
            rdkafka::Offset::Offset(offset) => Some(offset),
            _ => None,
        }
    }

    pub(crate) fn metrics(&self) -> String {
        self.running
            .as_ref()
            .map(|r| r.metrics().encode())
            .unwrap_or_default()
    }

    /// Writes an endpoint to the endpoints topic; it signs with [`SECRET`] unless told otherwise.
    pub(crate) async fn put_endpoint(&self, id: &str, mut config: serde_json::Value) {
        if config.get("secrets").is_none() {
            config["secrets"] = serde_json::json!([SECRET]);
        }
        let value = config.to_string();
        self.producer
            .send(
                FutureRecord::to(&self.topics.endpoints)
                    .key(id)
                    .payload(&value),
                DEADLINE,
            )
            .await
            .expect("endpoint written");
    }

    /// Publishes raw bytes to the main topic, keyed by `key`.
    pub(crate) async fn publish_bytes(
        &self,
        key: &str,
        value: &[u8],
        event_id: Option<&str>,
    ) -> (i32, i64) {
        let mut record = FutureRecord::to(&self.topics.events)
            .key(key)
            .payload(value);
        if let Some(id) = event_id {
            record = record.headers(OwnedHeaders::new().insert(Header {
                key: "webhook-id",
                value: Some(id),
            }));
        }
        let delivery = self
            .producer
            .send(record, DEADLINE)
            .await
            .expect("event written");
        (delivery.partition, delivery.offset)
    }

    /// Publishes JSON with a W3C `traceparent` header, as a traced producer would.
    pub(crate) async fn publish_json_traced(&self, event: &WebhookEvent, traceparent: &str) {
        let value = event.to_json();
        let headers = OwnedHeaders::new().insert(Header {
            key: "traceparent",
            value: Some(traceparent),
        });
        let record = FutureRecord::to(&self.topics.events)
            .key(event.endpoint_id.as_deref().unwrap_or_default())
            .payload(&value)
            .headers(headers);
        self.producer
            .send(record, DEADLINE)
            .await
            .expect("event written");
    }

    pub(crate) async fn publish_json(&self, event: &WebhookEvent) -> (i32, i64) {
        self.publish_bytes(
            event.endpoint_id.as_deref().unwrap_or_default(),
            &event.to_json(),
            Some(&event.event_id),
        )
        .await
    }

    pub(crate) async fn publish_avro(&self, event: &WebhookEvent) -> (i32, i64) {
        let bytes = self
            .registry
            .encode_value(
                &self.topics.events,
                WEBHOOK_EVENT_CURRENT,
                event.to_avro_value(),
            )
            .await
            .expect("encode through the registry");
        self.publish_bytes(
            event.endpoint_id.as_deref().unwrap_or_default(),
            &bytes,
            Some(&event.event_id),
        )
        .await
    }

    /// Waits for `count` DLQ records and decodes them through the registry.
    pub(crate) async fn dlq(&self, count: usize) -> Vec<(DlqEnvelope, OwnedMessage)> {
        let fresh = Registry::new(&registry_settings()).expect("registry");
        let mut out = Vec::new();
        for message in read_all(&self.kafka, &self.topics.dlq, count, DEADLINE).await {
            let bytes = message.payload().expect("a DLQ value");
            assert_eq!(bytes[0], 0, "Confluent framing");
            let value = fresh
                .decode(bytes)
                .await
                .expect("decodes through the registry");
            out.push((
                DlqEnvelope::from_avro_value(value).expect("a DLQ envelope"),
                message,
            ));
        }
        out
    }

    /// The value of one metric line (`name{labels}`), 0 when absent.
    pub(crate) fn metric(&self, series: &str) -> u64 {
        self.metrics()
            .lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The sum of a counter family over its labels.
    pub(crate) fn metric_sum(&self, family: &str) -> u64 {
        self.metrics()
            .lines()
            .filter(|line| line.starts_with(&format!("{family}{{")))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Waits until `name` received at least `count` requests.
    pub(crate) async fn wait_for_requests(&self, name: &str, count: usize) {
        wait_until(DEADLINE, &format!("{count} requests on {name}"), || async {
            (self.receiver.count(name) >= count).then_some(())
        })
        .await;
    }

    /// Makes `endpoint` known fast to the running dispatcher: one event delivered to it,
    /// answered well (its receiver script `name` must answer its next request 2xx at once).
    /// Until then its records go through the slow lane.
    pub(crate) async fn warm(&self, endpoint: &str, name: &str) {
        const SUCCEEDED: &str = r#"webhook_delivery_total{status="succeeded"}"#;
        let before = self.metric(SUCCEEDED);
        self.publish_json(&event(endpoint, usize::MAX)).await;
        self.wait_for_requests(name, 1).await;
        self.wait_for_metric(SUCCEEDED, before + 1).await;
    }

    /// Waits until a metric line reaches `at_least`.
    pub(crate) async fn wait_for_metric(&self, series: &str, at_least: u64) {
        wait_until(DEADLINE, &format!("{series} >= {at_least}"), || async {
            (self.metric(series) >= at_least).then_some(())
        })
        .await;
    }
}

pub(crate) fn event(endpoint: &str, n: usize) -> WebhookEvent {
    WebhookEvent {
        event_id: format!("evt-{}-{n}", unique_name("id")),
        event_type: "invoice.paid".to_owned(),
        endpoint_id: Some(endpoint.to_owned()),
        tenant_id: None,
        channels: Vec::new(),
        endpoint_url: None,
        payload: format!(r#"{{"invoice":{n},"amount":"12.50"}}"#).into_bytes(),
        content_type: "application/json".to_owned(),
        headers: BTreeMap::from([("x-tenant".to_owned(), "acme".to_owned())]),
        // Now, as a producer stamps it: a strict endpoint's age counts from it.
        created_at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        expires_at_ms: None,
    }
}
