//! Where the local stack is, and names that keep tests apart.

use hookline_kafka::{KafkaSettings, RegistrySettings};

/// The local broker, or `HOOKLINE_TEST_BOOTSTRAP` when set.
pub fn kafka_settings() -> KafkaSettings {
    KafkaSettings::new(
        std::env::var("HOOKLINE_TEST_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".to_owned()),
    )
}

/// The local registry's Confluent-compatible API, or `HOOKLINE_TEST_REGISTRY` when set.
pub fn registry_settings() -> RegistrySettings {
    RegistrySettings {
        url: std::env::var("HOOKLINE_TEST_REGISTRY")
            .unwrap_or_else(|_| "http://127.0.0.1:8081/apis/ccompat/v7".to_owned()),
        ..RegistrySettings::default()
    }
}

/// A topic, group or subject name no other test (or run) uses.
pub fn unique_name(prefix: &str) -> String {
    format!("t-{prefix}-{}", uuid::Uuid::new_v4().simple())
}
