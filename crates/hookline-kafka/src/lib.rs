//! Shared Kafka and schema-registry plumbing for hookline: client settings, topic admin,
//! and Confluent-framed Avro through a registry.

mod admin;
mod error;
mod registry;
mod settings;

pub use admin::{TopicSpec, ensure_topics};
pub use error::{Error, Result};
pub use registry::{Compatibility, Registry, RegistrySettings};
pub use settings::KafkaSettings;
