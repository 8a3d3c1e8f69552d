//! Shared Kafka and schema-registry plumbing for hookline: client settings, topic admin,
//! headers read as bytes, and Confluent-framed Avro through a registry.

mod admin;
mod error;
mod headers;
mod producer;
mod registry;
mod settings;
mod system_tls;

pub use admin::{TopicSpec, ensure_topics};
pub use error::{Error, Result};
pub use headers::{NativeHeaders, RawHeader, read_header_list, read_headers};
pub use producer::{DeliveryFuture, FutureContext, FutureProducer, PolledProducer};
pub use registry::{
    Compatibility, MAX_DECODED_BYTES, MAX_SCHEMA_DEPTH, Registry, RegistrySettings,
    RegistrySettingsError, STARTUP_PATIENCE, SchemaRefusal, check_writer_schema, with_patience,
};
pub use settings::{KafkaSettings, PropertyError, RESERVED_PROPERTIES, is_sensitive};
pub use system_tls::{system_tls, with_system_tls};
