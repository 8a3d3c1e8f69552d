//! The publisher's user-facing config.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

use crate::topics::DEFAULT_EVENTS_TOPIC;

/// How record values are encoded.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// Avro of `schemas/webhook_event.v3.avsc`, framed with its registry id (subject
    /// `<topic>-value`).
    #[default]
    Avro,
    /// The JSON form of `WebhookEvent::to_json`; needs no registry.
    Json,
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Encoding::Avro => "avro",
            Encoding::Json => "json",
        })
    }
}

impl FromStr for Encoding {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "avro" => Ok(Encoding::Avro),
            "json" => Ok(Encoding::Json),
            other => Err(format!("unknown encoding `{other}`: use avro or json")),
        }
    }
}

/// What a [`Publisher`](super::Publisher) publishes to, and how.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PublisherConfig {
    /// The events topic.
    #[serde(default = "default_topic")]
    pub topic: String,
    /// How record values are encoded.
    #[serde(default)]
    pub encoding: Encoding,
    /// Largest payload accepted, in bytes; a larger event is refused before anything is sent.
    #[serde(default = "default_max_payload_bytes")]
    pub max_payload_bytes: usize,
    /// How long a send may wait for room in the producer's queue, in milliseconds.
    #[serde(default = "default_queue_timeout_ms")]
    pub queue_timeout_ms: u64,
}

fn default_topic() -> String {
    DEFAULT_EVENTS_TOPIC.to_owned()
}

fn default_max_payload_bytes() -> usize {
    512 * 1024
}

fn default_queue_timeout_ms() -> u64 {
    30_000
}

impl Default for PublisherConfig {
    fn default() -> Self {
        PublisherConfig {
            topic: default_topic(),
            encoding: Encoding::default(),
            max_payload_bytes: default_max_payload_bytes(),
            queue_timeout_ms: default_queue_timeout_ms(),
        }
    }
}

impl PublisherConfig {
    /// Defaults, publishing to `topic` with `encoding`.
    pub fn new(topic: impl Into<String>, encoding: Encoding) -> Self {
        PublisherConfig {
            topic: topic.into(),
            encoding,
            ..PublisherConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_unknown_fields() {
        let config: PublisherConfig = serde_json::from_str("{}").expect("defaults");
        assert_eq!(config, PublisherConfig::default());
        assert_eq!(config.topic, "webhook-events");
        assert_eq!(config.encoding, Encoding::Avro);
        let json: PublisherConfig =
            serde_json::from_str(r#"{"encoding": "json"}"#).expect("json encoding");
        assert_eq!(json.encoding, Encoding::Json);
        assert!(serde_json::from_str::<PublisherConfig>(r#"{"topik": "x"}"#).is_err());
    }

    #[test]
    fn encoding_text() {
        for encoding in [Encoding::Avro, Encoding::Json] {
            assert_eq!(encoding.to_string().parse(), Ok(encoding));
        }
        assert!("protobuf".parse::<Encoding>().is_err());
    }
}
