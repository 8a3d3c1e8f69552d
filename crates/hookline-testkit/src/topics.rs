//! Per-test topics on the real broker, and reading a topic back.

use std::time::Duration;

use hookline_kafka::{KafkaSettings, TopicSpec, ensure_topics};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::{Offset, TopicPartitionList};

use crate::stack::unique_name;

/// A test's own main, retry, DLQ and endpoints topics.
#[derive(Clone, Debug)]
pub struct TestTopics {
    /// The main topic.
    pub events: String,
    /// The DLQ topic (`<events>.dlq`).
    pub dlq: String,
    /// The endpoints topic.
    pub endpoints: String,
    /// The fan-out topic of tenant events (`<events>.fanout`).
    pub fanout: String,
    /// The attempt log (`<events>.attempts`), as many partitions as the events topic.
    pub attempts: String,
    /// The compacted cancellations (`<events>.cancellations`).
    pub cancellations: String,
    /// Retry tier suffixes (`200ms`, ...).
    pub tiers: Vec<String>,
}

impl TestTopics {
    /// Names for a test, with short retry tiers.
    pub fn new(test: &str, tiers: &[&str]) -> Self {
        let events = unique_name(test);
        TestTopics {
            dlq: format!("{events}.dlq"),
            endpoints: format!("{events}-endpoints"),
            fanout: format!("{events}.fanout"),
            attempts: format!("{events}.attempts"),
            cancellations: format!("{events}.cancellations"),
            tiers: tiers.iter().map(|t| (*t).to_owned()).collect(),
            events,
        }
    }

    /// The tiers as the items of a TOML array (`"200ms", "1s"`), for a dispatcher config's
    /// `[topics] retry_tiers = [...]`.
    pub fn tiers_toml(&self) -> String {
        let quoted: Vec<String> = self.tiers.iter().map(|t| format!("{t:?}")).collect();
        quoted.join(", ")
    }

    /// The topic of a retry tier.
    pub fn tier_topic(&self, suffix: &str) -> String {
        format!("{}.retry.{suffix}", self.events)
    }

    /// Creates every topic, the main and retry topics with `partitions` partitions.
    pub async fn create(&self, settings: &KafkaSettings, partitions: i32) {
        let mut specs = vec![
            TopicSpec::new(&self.events, partitions, 1),
            TopicSpec::new(&self.fanout, partitions, 1),
            TopicSpec::new(&self.attempts, partitions, 1),
            TopicSpec::new(&self.dlq, 1, 1),
            TopicSpec::new(&self.endpoints, 1, 1).config("cleanup.policy", "compact"),
            TopicSpec::new(&self.cancellations, 1, 1).config("cleanup.policy", "compact"),
        ];
        for tier in &self.tiers {
            specs.push(TopicSpec::new(self.tier_topic(tier), partitions, 1));
        }
        ensure_topics(settings, &specs)
            .await
            .expect("create the test's topics");
    }
}

/// Reads `topic` from the beginning until it has at least `count` records, failing after
/// `deadline`; returns every record read.
pub async fn read_all(
    settings: &KafkaSettings,
    topic: &str,
    count: usize,
    deadline: Duration,
) -> Vec<OwnedMessage> {
    let mut config = settings.client_config();
    config
        .set("group.id", unique_name("reader"))
        .set("enable.auto.commit", "false");
    let consumer: StreamConsumer = config.create().expect("reader");
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("topic metadata");
    let mut assignment = TopicPartitionList::new();
    for t in metadata.topics() {
        for p in t.partitions() {
            assignment
                .add_partition_offset(topic, p.id(), Offset::Beginning)
                .expect("partition");
        }
    }
    consumer.assign(&assignment).expect("assign");
    let give_up = tokio::time::Instant::now() + deadline;
    let mut records = Vec::new();
    while records.len() < count {
        match tokio::time::timeout_at(give_up, consumer.recv()).await {
            Ok(Ok(message)) => records.push(message.detach()),
            Ok(Err(error)) => panic!("reading {topic}: {error}"),
            Err(_) => panic!(
                "timed out after {deadline:?} with {} of {count} records in {topic}",
                records.len()
            ),
        }
    }
    // Pick up anything that arrived beyond the count, briefly.
    while let Ok(Ok(message)) =
        tokio::time::timeout(Duration::from_millis(300), consumer.recv()).await
    {
        records.push(message.detach());
    }
    records.sort_by_key(|m| (m.partition(), m.offset()));
    records
}
