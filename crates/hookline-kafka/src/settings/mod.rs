//! Kafka client settings shared by the producer, the dispatcher and the DLQ tooling.

mod properties;

use std::collections::BTreeMap;
use std::fmt;

use rdkafka::ClientConfig;
use rdkafka::error::KafkaError;
use serde::Deserialize;

pub use properties::{PropertyError, RESERVED_PROPERTIES, is_sensitive};

/// How to reach the Kafka cluster.
///
/// Its `Debug` shows secret properties (`sasl.password`, `ssl.key.pem`, any name with
/// `password`, `secret` or `token`...) as `<redacted>`.
#[derive(Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KafkaSettings {
    /// Comma-separated `host:port` list of brokers.
    #[serde(default = "default_bootstrap")]
    pub bootstrap_servers: String,
    /// Extra librdkafka properties (security, tuning), applied last. A value may be a
    /// reference, `${env:NAME}` or `${file:PATH}`, resolved when a client is configured.
    /// The properties hookline's guarantees depend on are refused
    /// ([`RESERVED_PROPERTIES`], checked by [`KafkaSettings::validate`]).
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

impl fmt::Debug for KafkaSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let properties: BTreeMap<&str, String> = self
            .properties
            .iter()
            .map(|(key, value)| (key.as_str(), properties::shown(key, value)))
            .collect();
        f.debug_struct("KafkaSettings")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("properties", &properties)
            .finish()
    }
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

    /// Checks the user's properties, to be called at start-up: none is one hookline sets
    /// itself ([`RESERVED_PROPERTIES`]), every reference resolves, and librdkafka knows
    /// every property and accepts its value. The error names the property (and the
    /// reference), never a secret value.
    pub fn validate(&self) -> Result<(), PropertyError> {
        let mut probe = ClientConfig::new();
        for (key, value) in &self.properties {
            if let Some(reason) = properties::reserved(key) {
                return Err(PropertyError::Reserved {
                    property: key.clone(),
                    reason,
                });
            }
            let resolved = properties::resolve(key, value)?;
            probe.set(key, resolved.expose());
            if let Err(error) = probe.create_native_config() {
                let reason = match error {
                    KafkaError::ClientConfig(_, reason, _, _) => reason,
                    other => other.to_string(),
                };
                return Err(PropertyError::Refused {
                    property: key.clone(),
                    reason: properties::scrub(key, resolved.expose(), &reason),
                });
            }
        }
        Ok(())
    }

    /// Sets the user's properties on `config`, references resolved. One that does not
    /// resolve (which [`KafkaSettings::validate`] reports at start-up) is left out with a
    /// warning naming it, so the client fails to authenticate rather than send the
    /// reference as the value.
    fn apply_properties(&self, config: &mut ClientConfig) {
        for (key, value) in &self.properties {
            // `validate` refuses them at start-up; a library user who skipped it still
            // cannot weaken hookline's guarantees.
            if properties::reserved(key).is_some() {
                tracing::warn!(property = %key, "reserved kafka property left out");
                continue;
            }
            match properties::resolve(key, value) {
                Ok(resolved) => {
                    config.set(key, resolved.expose());
                }
                Err(error) => tracing::warn!(%error, "kafka property left out"),
            }
        }
    }

    /// A base client config: the brokers plus the user's extra properties.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        self.apply_properties(&mut config);
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
        self.apply_properties(&mut config);
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
        self.apply_properties(&mut config);
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(key: &str, value: &str) -> KafkaSettings {
        let mut settings = KafkaSettings::default();
        settings.properties.insert(key.to_owned(), value.to_owned());
        settings
    }

    #[test]
    fn debug_redacts_secret_properties() {
        let mut settings = with("sasl.password", "hunter2");
        for key in [
            "ssl.key.password",
            "ssl.keystore.password",
            "ssl.key.pem",
            "sasl.oauthbearer.client.secret",
            "sasl.jaas.config",
            "vendor.api.token",
        ] {
            settings
                .properties
                .insert(key.to_owned(), "hunter2".to_owned());
        }
        settings
            .properties
            .insert("sasl.username".to_owned(), "hookline".to_owned());
        let shown = format!("{settings:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
        assert!(shown.contains("hookline"), "{shown}");
    }

    #[test]
    fn reserved_properties_are_refused_naming_them() {
        for (key, value) in [
            ("acks", "1"),
            ("enable.idempotence", "false"),
            ("enable.auto.offset.store", "true"),
            ("enable.auto.commit", "false"),
            ("isolation.level", "read_uncommitted"),
            ("group.id", "other"),
            ("transactional.id", "other"),
            ("bootstrap.servers", "10.0.0.1:9092"),
        ] {
            let error = with(key, value).validate().expect_err(key).to_string();
            assert!(error.contains(&format!("`{key}`")), "{error}");
            assert!(error.contains("cannot be set"), "{error}");
        }
        with("security.protocol", "SASL_SSL")
            .validate()
            .expect("allowed");
    }

    #[test]
    fn references_resolve_when_clients_are_configured() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("password");
        std::fs::write(&file, "hunter2\n").expect("write");
        let reference = format!("${{file:{}}}", file.display());
        let settings = with("sasl.password", &reference);
        settings.validate().expect("resolves");
        for config in [
            settings.client_config(),
            settings.producer_config(),
            settings.consumer_config("group"),
        ] {
            assert_eq!(config.get("sasl.password"), Some("hunter2"));
        }
        // The reference is what is shown.
        assert!(format!("{settings:?}").contains(&reference));
    }

    #[test]
    fn reserved_properties_never_reach_a_client_even_unvalidated() {
        let mut settings = with("acks", "0");
        settings
            .properties
            .insert("enable.auto.offset.store".into(), "true".into());
        assert_eq!(settings.producer_config().get("acks"), Some("all"));
        assert_eq!(
            settings
                .consumer_config("group")
                .get("enable.auto.offset.store"),
            Some("false")
        );
        assert_eq!(settings.client_config().get("acks"), None);
    }

    #[test]
    fn unresolved_references_name_the_property_and_the_reference() {
        let settings = with("sasl.password", "${env:HOOKLINE_NO_SUCH_VARIABLE_K4}");
        let error = settings.validate().expect_err("unset").to_string();
        assert!(error.contains("sasl.password"), "{error}");
        assert!(error.contains("HOOKLINE_NO_SUCH_VARIABLE_K4"), "{error}");
        // Left out rather than sent as the password.
        assert_eq!(settings.client_config().get("sasl.password"), None);
    }

    #[test]
    fn properties_librdkafka_refuses_are_named() {
        let error = with("no.such.property", "1")
            .validate()
            .expect_err("unknown");
        assert!(error.to_string().contains("no.such.property"), "{error}");
        let error = with("linger.ms", "soon")
            .validate()
            .expect_err("not a number");
        assert!(error.to_string().contains("linger.ms"), "{error}");
    }
}
