//! A scenario's own topics (6 partitions, the retry tiers, the DLQ, the endpoint table)
//! and endpoint configs, removed again at the end.

use std::time::Duration;

use anyhow::Context as _;
use hookline_core::EndpointConfig;
use hookline_core::policy::RetryTiers;
use hookline_kafka::KafkaSettings;
use hookline_producer::{EndpointStore, Topics, TopicsPlan, provision};
use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;

/// Partitions of the events topic (and of the tiers and the DLQ).
pub const PARTITIONS: i32 = 6;

/// A scenario's topics.
pub struct Fixture {
    /// The names.
    pub topics: Topics,
    created: Vec<String>,
    store: EndpointStore,
}

impl Fixture {
    /// Creates topics named after `name` with these retry tiers.
    pub async fn create(
        kafka: &KafkaSettings,
        name: &str,
        tiers: &[String],
    ) -> anyhow::Result<Fixture> {
        let topics = Topics::new(name, format!("{name}-endpoints"));
        let mut plan = TopicsPlan::new(topics.clone());
        plan.tiers = RetryTiers::from_suffixes(tiers).context("the retry tiers")?;
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
        let store = EndpointStore::new(kafka, topics.endpoints.clone())
            .context("opening the endpoint table")?;
        Ok(Fixture {
            topics,
            created,
            store,
        })
    }

    /// Writes an endpoint to the table.
    pub async fn put_endpoint(&self, id: &str, url: &str, secret: &str) -> anyhow::Result<()> {
        self.store
            .put(id, &EndpointConfig::new(url, vec![secret.to_owned()]))
            .await
            .with_context(|| format!("registering endpoint {id}"))
    }

    /// Lets the events topic take records up to `bytes` (a topic may; hookline's producer
    /// keeps librdkafka's 1,000,000).
    pub async fn allow_large_records(
        &self,
        kafka: &KafkaSettings,
        bytes: usize,
    ) -> anyhow::Result<()> {
        let admin: AdminClient<DefaultClientContext> = kafka
            .client_config()
            .create()
            .context("creating the admin client")?;
        let bytes = bytes.to_string();
        let alter = AlterConfig::new(ResourceSpecifier::Topic(&self.topics.events))
            .set("max.message.bytes", &bytes);
        for result in admin
            .alter_configs(&[alter], &AdminOptions::new())
            .await
            .context("altering the events topic")?
        {
            result.map_err(|(_, code)| anyhow::anyhow!("altering the events topic: {code}"))?;
        }
        Ok(())
    }

    /// Deletes the topics and the consumer group.
    pub async fn remove(&self, kafka: &KafkaSettings, group: &str) -> anyhow::Result<()> {
        let admin: AdminClient<DefaultClientContext> = kafka
            .client_config()
            .create()
            .context("creating the admin client")?;
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        // A killed member stays in the group until its session times out: try again.
        for _ in 0..5 {
            let results = admin
                .delete_groups(&[group], &options)
                .await
                .context("deleting the group")?;
            match results.into_iter().next() {
                Some(Err((_, RDKafkaErrorCode::NonEmptyGroup))) => {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                Some(Err((group, code))) => {
                    tracing::warn!(%group, %code, "could not delete a consumer group");
                    break;
                }
                Some(Ok(_)) | None => break,
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
