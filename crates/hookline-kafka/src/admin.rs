//! Topic provisioning: create what is missing, leave what exists alone.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;

use crate::{Error, KafkaSettings, Result};

/// A topic to provision.
#[derive(Clone, Debug, PartialEq)]
pub struct TopicSpec {
    /// Its name.
    pub name: String,
    /// How many partitions.
    pub partitions: i32,
    /// Replication factor; 1 on a single local broker.
    pub replication: i32,
    /// Topic configs such as `cleanup.policy` or `retention.ms`.
    pub configs: Vec<(String, String)>,
}

impl TopicSpec {
    /// A topic with default configs.
    pub fn new(name: impl Into<String>, partitions: i32, replication: i32) -> Self {
        TopicSpec {
            name: name.into(),
            partitions,
            replication,
            configs: Vec::new(),
        }
    }

    /// Adds a topic config.
    pub fn config(mut self, key: &str, value: impl Into<String>) -> Self {
        self.configs.push((key.to_owned(), value.into()));
        self
    }
}

/// Creates each topic that does not exist yet; returns the names it created.
pub async fn ensure_topics(settings: &KafkaSettings, topics: &[TopicSpec]) -> Result<Vec<String>> {
    let admin: AdminClient<DefaultClientContext> =
        settings
            .client_config()
            .create()
            .map_err(|source| Error::Kafka {
                context: "creating the admin client".to_owned(),
                source,
            })?;
    let new_topics: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|spec| {
            let mut topic = NewTopic::new(
                &spec.name,
                spec.partitions,
                TopicReplication::Fixed(spec.replication),
            );
            for (key, value) in &spec.configs {
                topic = topic.set(key, value);
            }
            topic
        })
        .collect();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = admin
        .create_topics(&new_topics, &options)
        .await
        .map_err(|source| Error::Kafka {
            context: "creating topics".to_owned(),
            source,
        })?;
    let mut created = Vec::new();
    for result in results {
        match result {
            Ok(name) => created.push(name),
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => return Err(Error::CreateTopic { topic, code }),
        }
    }
    Ok(created)
}
