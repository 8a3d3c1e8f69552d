//! The dispatcher's checks of `kafka.properties`: the properties its guarantees depend on
//! are refused, secret references must resolve, and errors name the property.

use super::DispatcherConfig;

fn with(key: &str, value: &str) -> DispatcherConfig {
    let mut config = DispatcherConfig::default();
    config
        .kafka
        .properties
        .insert(key.to_owned(), value.to_owned());
    config
}

#[test]
fn overrides_of_guarantees_name_the_property() {
    for (key, value) in [
        ("acks", "1"),
        ("enable.idempotence", "false"),
        ("enable.auto.offset.store", "true"),
        ("enable.auto.commit", "false"),
        ("isolation.level", "read_uncommitted"),
        ("group.id", "someone-else"),
        ("transactional.id", "someone-else"),
        ("bootstrap.servers", "10.0.0.1:9092"),
    ] {
        let error = with(key, value).into_settings().expect_err(key).to_string();
        assert!(
            error.contains(&format!("kafka.properties.{key}")),
            "{error}"
        );
        assert!(error.contains("cannot be set"), "{error}");
    }
}

#[test]
fn security_properties_are_accepted() {
    let mut config = with("security.protocol", "SASL_SSL");
    for (key, value) in [
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.username", "hookline"),
        ("sasl.password", "${env:PATH}"),
    ] {
        config
            .kafka
            .properties
            .insert(key.to_owned(), value.to_owned());
    }
    config.into_settings().expect("a SASL_SSL config");
}

#[test]
fn unresolved_secrets_name_the_property_and_reference() {
    let error = with("sasl.password", "${env:HOOKLINE_NO_SUCH_VARIABLE_D7}")
        .into_settings()
        .expect_err("unset variable")
        .to_string();
    assert!(error.contains("kafka.properties.sasl.password"), "{error}");
    assert!(error.contains("HOOKLINE_NO_SUCH_VARIABLE_D7"), "{error}");
}

#[test]
fn a_resumed_tier_is_fetched_within_100_ms_unless_the_user_says_otherwise() {
    let settings = DispatcherConfig::default()
        .into_settings()
        .expect("defaults");
    let config = settings.consumer_config();
    assert_eq!(config.get("fetch.wait.max.ms"), Some("100"));
    let settings = with("fetch.wait.max.ms", "500")
        .into_settings()
        .expect("a user's fetch wait");
    assert_eq!(
        settings.consumer_config().get("fetch.wait.max.ms"),
        Some("500")
    );
}

#[test]
fn the_prefetch_is_4_mib_topped_up_at_once_unless_the_user_says_otherwise() {
    let settings = DispatcherConfig::default()
        .into_settings()
        .expect("defaults");
    let config = settings.consumer_config();
    assert_eq!(config.get("queued.max.messages.kbytes"), Some("4096"));
    assert_eq!(config.get("fetch.queue.backoff.ms"), Some("10"));
    let settings = with("queued.max.messages.kbytes", "65536")
        .into_settings()
        .expect("a user's prefetch");
    let config = settings.consumer_config();
    assert_eq!(config.get("queued.max.messages.kbytes"), Some("65536"));
    assert_eq!(config.get("fetch.queue.backoff.ms"), Some("10"));
}
