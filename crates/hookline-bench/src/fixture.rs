//! The benchmark's fixture: its own topics (events with 6 partitions, a retry tier, the
//! DLQ, the endpoint table), one endpoint pointing at the sink, and a backlog of JSON events
//! published before anything is measured; removed again at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use hookline_core::policy::RetryTiers;
use hookline_core::signing::SigningSecret;
use hookline_core::{EndpointConfig, WebhookEvent};
use hookline_kafka::KafkaSettings;
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

/// Events published in one batch, and at once within it.
const BATCH: usize = 5_000;
const IN_FLIGHT: usize = 1_000;

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
        let mut plan = TopicsPlan::new(topics.clone());
        plan.tiers = RetryTiers::from_suffixes(&[RETRY_TIER]).context("the retry tier")?;
        plan.partitions = PARTITIONS;
        plan.table_partitions = 1;
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

        let store = EndpointStore::new(kafka, fixture.topics.endpoints.clone())
            .context("opening the endpoint table")?;
        let secret = SigningSecret::generate(&mut rand::rng()).to_whsec();
        store
            .put(ENDPOINT_ID, &EndpointConfig::new(sink_url, vec![secret]))
            .await
            .context("registering the endpoint")?;

        let publisher = Publisher::new(
            kafka,
            None,
            PublisherConfig::new(fixture.topics.events.clone(), Encoding::Json),
        )
        .context("creating the publisher")?;
        let payload = payload(payload_bytes);
        let mut next = 0;
        while next < events {
            let end = (next + BATCH as u64).min(events);
            let batch: Vec<WebhookEvent> = (next..end)
                .map(|n| event(&name, n, payload.clone()))
                .collect();
            for result in publisher.publish_many(&batch, IN_FLIGHT).await {
                if let Err(error) = result {
                    bail!("publishing the backlog: {error}");
                }
            }
            next = end;
        }
        publisher
            .flush(Duration::from_secs(30))
            .await
            .context("flushing the backlog")?;
        Ok(fixture)
    }

    /// Deletes the topics and the given consumer groups.
    pub async fn remove(&self, kafka: &KafkaSettings, groups: &[String]) -> anyhow::Result<()> {
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
        let topics: Vec<&str> = self.created.iter().map(String::as_str).collect();
        for result in admin
            .delete_topics(&topics, &options)
            .await
            .context("deleting the topics")?
        {
            if let Err((topic, code)) = result {
                tracing::warn!(%topic, %code, "could not delete a topic");
            }
        }
        Ok(())
    }
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
}
