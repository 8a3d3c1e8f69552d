//! The benchmark's fixtures, each on its own topics, set up before anything is measured and
//! removed again at the end.
//!
//! - Direct: events with 6 partitions, a retry tier, the DLQ, the endpoint table; one
//!   endpoint pointing at the sink, and a backlog of JSON events to it. No tenant events, so
//!   hookline's fan-out stage (on by default) stays idle.
//! - Fan-out: an endpoint table with `endpoints` endpoints of one tenant, each at the sink
//!   with its own query string, and a backlog of tenant events on one fan-out topic; plus a
//!   fresh events topic (with its retry tier and DLQ) for each round, so that a round's
//!   fan-out writes its deliveries where no other round's are.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use hookline_core::policy::RetryTiers;
use hookline_core::signing::SigningSecret;
use hookline_core::{EndpointConfig, WebhookEvent};
use hookline_kafka::{KafkaSettings, TopicSpec, ensure_topics};
use hookline_producer::{
    Encoding, EndpointStore, Publisher, PublisherConfig, Topics, TopicsPlan, provision,
};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;

/// Partitions of the events topic.
pub const PARTITIONS: i32 = 6;
/// The retry tier hookline is given (no event is retried: the sink always answers 204).
pub const RETRY_TIER: &str = "5s";
/// The one endpoint's id.
pub const ENDPOINT_ID: &str = "bench";
/// The tenant of the fan-out scenario's endpoints and events.
pub const TENANT: &str = "bench";

/// Events published in one batch, and at once within it.
const BATCH: usize = 5_000;
const IN_FLIGHT: usize = 1_000;
/// Endpoints registered at once.
const PUTS_IN_FLIGHT: usize = 64;

/// The topics and the backlog of one benchmark run.
#[derive(Debug)]
pub struct Fixture {
    /// Topic names.
    pub topics: Topics,
    /// Every topic created, to remove at the end.
    pub created: Vec<String>,
    /// Events in the backlog.
    pub events: u64,
}

impl Fixture {
    /// Creates the topics and the endpoint, and publishes `events` events of about
    /// `payload_bytes` each.
    pub async fn create(
        kafka: &KafkaSettings,
        sink_url: &str,
        events: u64,
        payload_bytes: usize,
    ) -> anyhow::Result<Self> {
        let name = hookline_testkit::unique_name("bench");
        let topics = Topics::new(&name, format!("{name}-endpoints"));
        let plan = plan(topics.clone())?;
        let created = plan
            .specs()
            .context("the topics plan")?
            .into_iter()
            .map(|spec| spec.name)
            .collect();
        provision(kafka, &plan)
            .await
            .context("creating the topics")?;
        let fixture = Fixture {
            topics,
            created,
            events,
        };
        let filled = fixture.fill(kafka, sink_url, &name, payload_bytes).await;
        or_remove(kafka, &fixture.created, filled).await?;
        Ok(fixture)
    }

    async fn fill(
        &self,
        kafka: &KafkaSettings,
        sink_url: &str,
        name: &str,
        payload_bytes: usize,
    ) -> anyhow::Result<()> {
        let store = EndpointStore::new(kafka, self.topics.endpoints.clone())
            .context("opening the endpoint table")?;
        let secret = SigningSecret::generate(&mut rand::rng()).to_whsec();
        store
            .put(ENDPOINT_ID, &EndpointConfig::new(sink_url, vec![secret]))
            .await
            .context("registering the endpoint")?;
        let payload = payload(payload_bytes);
        publish_backlog(kafka, &self.topics.events, self.events, |n| {
            event(name, n, payload.clone())
        })
        .await
    }
}

/// The fan-out scenario's topics and backlog.
#[derive(Debug)]
pub struct FanoutFixture {
    /// The fan-out topic holding the tenant events, which every round reads from the start.
    pub fanout_topic: String,
    /// The endpoint table.
    pub endpoints_topic: String,
    /// Each round's events topic, round 1 first; each has its retry tier and DLQ.
    pub round_events: Vec<String>,
    /// Every topic created, to remove at the end.
    pub created: Vec<String>,
    /// Tenant events in the backlog.
    pub events: u64,
    /// Endpoints of the tenant, each subscribed to every event type.
    pub endpoints: u64,
}

impl FanoutFixture {
    /// Creates the topics (those of `rounds` rounds), registers `endpoints` endpoints of
    /// [`TENANT`] at `<sink_url>?ep=<i>`, and publishes `events` tenant events of about
    /// `payload_bytes` each.
    pub async fn create(
        kafka: &KafkaSettings,
        sink_url: &str,
        events: u64,
        endpoints: u64,
        rounds: u32,
        payload_bytes: usize,
    ) -> anyhow::Result<Self> {
        let name = hookline_testkit::unique_name("bench-fanout");
        let base = Topics::new(&name, format!("{name}-endpoints"));
        let round_events: Vec<String> = (1..=rounds)
            .map(|round| format!("{name}-r{round}"))
            .collect();
        let specs = fanout_specs(&base, &round_events)?;
        let fixture = FanoutFixture {
            fanout_topic: base.fanout(),
            endpoints_topic: base.endpoints.clone(),
            round_events,
            created: specs.iter().map(|spec| spec.name.clone()).collect(),
            events,
            endpoints,
        };
        ensure_topics(kafka, &specs)
            .await
            .context("creating the topics")?;
        let filled = fixture.fill(kafka, sink_url, &base, payload_bytes).await;
        or_remove(kafka, &fixture.created, filled).await?;
        Ok(fixture)
    }

    /// Deliveries the sink must see in one round: one per event and endpoint.
    pub fn deliveries(&self) -> u64 {
        self.events.saturating_mul(self.endpoints)
    }

    /// The topics of round `round` (from 1): its own events topic, the shared endpoint
    /// table.
    pub fn round_topics(&self, round: u32) -> anyhow::Result<Topics> {
        let events = usize::try_from(round)
            .ok()
            .and_then(|round| round.checked_sub(1))
            .and_then(|index| self.round_events.get(index))
            .with_context(|| format!("the fan-out fixture has no topics for round {round}"))?;
        Ok(Topics::new(events, &self.endpoints_topic))
    }

    async fn fill(
        &self,
        kafka: &KafkaSettings,
        sink_url: &str,
        base: &Topics,
        payload_bytes: usize,
    ) -> anyhow::Result<()> {
        let store = EndpointStore::new(kafka, self.endpoints_topic.clone())
            .context("opening the endpoint table")?;
        let secret = SigningSecret::generate(&mut rand::rng()).to_whsec();
        let store = &store;
        futures::stream::iter(0..self.endpoints)
            .map(|i| {
                let config = tenant_endpoint(&format!("{sink_url}?ep={i}"), &secret);
                async move {
                    store
                        .put(&fanout_endpoint_id(i), &config)
                        .await
                        .with_context(|| format!("registering endpoint {i}"))
                }
            })
            .buffer_unordered(PUTS_IN_FLIGHT)
            .try_collect::<()>()
            .await?;
        // The publisher sends tenant events to `<events>.fanout`, the base's fan-out topic.
        let payload = payload(payload_bytes);
        publish_backlog(kafka, &base.events, self.events, |n| {
            tenant_event(&base.events, n, payload.clone())
        })
        .await
    }
}

/// Deletes the given topics and consumer groups.
pub async fn remove(
    kafka: &KafkaSettings,
    topics: &[String],
    groups: &[String],
) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = kafka
        .client_config()
        .create()
        .context("creating the admin client")?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    if !groups.is_empty() {
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        for result in admin
            .delete_groups(&groups, &options)
            .await
            .context("deleting the consumer groups")?
        {
            if let Err((group, code)) = result {
                tracing::warn!(%group, %code, "could not delete a consumer group");
            }
        }
    }
    if !topics.is_empty() {
        let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
        for result in admin
            .delete_topics(&topics, &options)
            .await
            .context("deleting the topics")?
        {
            if let Err((topic, code)) = result {
                tracing::warn!(%topic, %code, "could not delete a topic");
            }
        }
    }
    Ok(())
}

/// `result`, after removing `topics` when it is an error (a fixture half set up).
async fn or_remove(
    kafka: &KafkaSettings,
    topics: &[String],
    result: anyhow::Result<()>,
) -> anyhow::Result<()> {
    if result.is_err()
        && let Err(error) = remove(kafka, topics, &[]).await
    {
        tracing::warn!(
            error = format!("{error:#}"),
            "could not remove a half set-up fixture"
        );
    }
    result
}

/// The plan of a fixture's topics: [`PARTITIONS`], the one [`RETRY_TIER`], a one-partition
/// endpoint table.
fn plan(topics: Topics) -> anyhow::Result<TopicsPlan> {
    let mut plan = TopicsPlan::new(topics);
    plan.tiers = RetryTiers::from_suffixes(&[RETRY_TIER]).context("the retry tier")?;
    plan.partitions = PARTITIONS;
    plan.table_partitions = 1;
    Ok(plan)
}

/// The fan-out fixture's topics: the base's fan-out topic and endpoint table, and for each
/// round's events topic everything but its own (unused) fan-out topic and endpoint table.
fn fanout_specs(base: &Topics, round_events: &[String]) -> anyhow::Result<Vec<TopicSpec>> {
    let (fanout, endpoints) = (base.fanout(), base.endpoints.clone());
    let mut specs: Vec<TopicSpec> = plan(base.clone())?
        .specs()
        .context("the topics plan")?
        .into_iter()
        .filter(|spec| spec.name == fanout || spec.name == endpoints)
        .collect();
    for events in round_events {
        let round = Topics::new(events, &endpoints);
        let unused = round.fanout();
        specs.extend(
            plan(round)?
                .specs()
                .context("the topics plan")?
                .into_iter()
                .filter(|spec| spec.name != unused && spec.name != endpoints),
        );
    }
    Ok(specs)
}

/// Publishes `events` events made by `make` (from their number) through a publisher on
/// `events_topic` (tenant events go to its fan-out topic), and waits for every ack.
async fn publish_backlog(
    kafka: &KafkaSettings,
    events_topic: &str,
    events: u64,
    make: impl Fn(u64) -> WebhookEvent,
) -> anyhow::Result<()> {
    let publisher = Publisher::new(
        kafka,
        None,
        PublisherConfig::new(events_topic.to_owned(), Encoding::Json),
    )
    .context("creating the publisher")?;
    let mut next = 0;
    while next < events {
        let end = (next + BATCH as u64).min(events);
        let batch: Vec<WebhookEvent> = (next..end).map(&make).collect();
        for result in publisher.publish_many(&batch, IN_FLIGHT).await {
            result.context("publishing the backlog")?;
        }
        next = end;
    }
    publisher
        .flush(Duration::from_secs(30))
        .await
        .context("flushing the backlog")
}

fn event(run: &str, n: u64, payload: Vec<u8>) -> WebhookEvent {
    WebhookEvent {
        event_id: format!("{run}-{n:07}"),
        event_type: "order.created".to_owned(),
        endpoint_id: Some(ENDPOINT_ID.to_owned()),
        tenant_id: None,
        channels: Vec::new(),
        endpoint_url: None,
        payload,
        content_type: "application/json".to_owned(),
        headers: BTreeMap::new(),
        created_at_ms: 0,
        expires_at_ms: None,
    }
}

/// Tenant event `n`: no endpoint, for every endpoint of [`TENANT`].
fn tenant_event(run: &str, n: u64, payload: Vec<u8>) -> WebhookEvent {
    WebhookEvent {
        endpoint_id: None,
        tenant_id: Some(TENANT.to_owned()),
        ..event(run, n, payload)
    }
}

/// The id of the fan-out scenario's endpoint `i`.
fn fanout_endpoint_id(i: u64) -> String {
    format!("ep-{i:05}")
}

/// An endpoint of [`TENANT`] subscribed to every event type.
fn tenant_endpoint(url: &str, secret: &str) -> EndpointConfig {
    EndpointConfig {
        tenant: Some(TENANT.to_owned()),
        event_types: Vec::new(),
        ..EndpointConfig::new(url, vec![secret.to_owned()])
    }
}

/// A compact JSON object of about `bytes` bytes.
fn payload(bytes: usize) -> Vec<u8> {
    let head = r#"{"id":"ord_42","amount_cents":4200,"currency":"EUR","note":""#;
    let tail = r#""}"#;
    let pad = bytes.saturating_sub(head.len() + tail.len());
    format!("{head}{}{tail}", "x".repeat(pad)).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_has_the_size_asked_for_and_is_json() {
        let body = payload(256);
        assert_eq!(body.len(), 256);
        assert!(serde_json::from_slice::<serde_json::Value>(&body).is_ok());
        assert!(serde_json::from_slice::<serde_json::Value>(&payload(1)).is_ok());
    }

    #[test]
    fn fanout_topics_share_the_backlog_and_table_but_not_the_events() {
        let base = Topics::new("fan", "fan-endpoints");
        let rounds = ["fan-r1".to_owned(), "fan-r2".to_owned()];
        let specs = fanout_specs(&base, &rounds).expect("specs");
        let names: Vec<&str> = specs.iter().map(|spec| spec.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "fan.fanout",
                "fan-endpoints",
                "fan-r1",
                "fan-r1.retry.5s",
                "fan-r1.dlq",
                "fan-r1.attempts",
                "fan-r1.dlq-actions",
                "fan-r1.cancellations",
                "fan-r2",
                "fan-r2.retry.5s",
                "fan-r2.dlq",
                "fan-r2.attempts",
                "fan-r2.dlq-actions",
                "fan-r2.cancellations",
            ]
        );
    }

    #[test]
    fn fanout_events_and_endpoints_are_valid() {
        let secret = SigningSecret::generate(&mut rand::rng()).to_whsec();
        let endpoint = tenant_endpoint("http://127.0.0.1:9/hook?ep=7", &secret);
        assert!(endpoint.validate().is_ok());
        assert_eq!(endpoint.tenant.as_deref(), Some(TENANT));
        let event = tenant_event("run", 3, payload(64));
        assert!(event.validate(1 << 20).is_ok());
        assert_eq!(
            (event.endpoint_id, event.tenant_id.as_deref()),
            (None, Some(TENANT))
        );
        assert_eq!(event.event_id, "run-0000003");
    }
}
