//! Kafka client settings shared by the producer, the dispatcher and the DLQ tooling.

use std::collections::BTreeMap;

use rdkafka::ClientConfig;
use serde::Deserialize;

/// How to reach the Kafka cluster.
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KafkaSettings {
    /// Comma-separated `host:port` list of brokers.
    #[serde(default = "default_bootstrap")]
    pub bootstrap_servers: String,
    /// Extra librdkafka properties (security, tuning), applied last.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// librdkafka's default `message.max.bytes`.
pub const DEFAULT_MESSAGE_MAX_BYTES: usize = 1_000_000;

fn default_bootstrap() -> String {
    "127.0.0.1:9092".to_owned()
}

impl Default for KafkaSettings {
    fn default() -> Self {
        KafkaSettings {
            bootstrap_servers: default_bootstrap(),
            properties: BTreeMap::new(),
        }
    }
}

impl KafkaSettings {
    /// Settings for the given bootstrap servers and nothing else.
    pub fn new(bootstrap_servers: impl Into<String>) -> Self {
        KafkaSettings {
            bootstrap_servers: bootstrap_servers.into(),
            properties: BTreeMap::new(),
        }
    }

    /// A base client config: the brokers plus the user's extra properties.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config
    }

    /// The producer's `message.max.bytes`: the user's property, else librdkafka's default
    /// (1000000). A value that is not a whole number of bytes is an error naming it.
    pub fn max_message_bytes(&self) -> std::result::Result<usize, String> {
        match self.properties.get("message.max.bytes") {
            None => Ok(DEFAULT_MESSAGE_MAX_BYTES),
            Some(text) => text
                .trim()
                .parse::<usize>()
                .map_err(|_| format!("`{text}` is not a whole number of bytes")),
        }
    }

    /// A producer whose writes are durable once acknowledged: idempotent, `acks=all`.
    pub fn producer_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.bootstrap_servers)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "5")
            .set("message.timeout.ms", "30000");
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config
    }

    /// A group consumer that commits only offsets hookline stored explicitly, after their
    /// outcome was durable (auto-commit of stored offsets, no automatic storing).
    pub fn consumer_config(&self, group_id: &str) -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.bootstrap_servers)
            .set("group.id", group_id)
            .set("enable.auto.commit", "true")
            .set("auto.commit.interval.ms", "1000")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("enable.partition.eof", "false");
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config
    }
}
