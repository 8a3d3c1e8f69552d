//! hookline through the stack's SASL_SSL listener only (TLS with the stack's CA,
//! SCRAM-SHA-512, the password given as a `${file:...}` reference): the `Publisher`
//! publishes, a dispatcher delivers, the receiver gets the webhook. A wrong password fails
//! without the password in the error.
//!
//! The listener is found through `HOOKLINE_TEST_SECURE_BOOTSTRAP`,
//! `HOOKLINE_TEST_KAFKA_CA` and `HOOKLINE_TEST_KAFKA_PASSWORD_FILE` (`deploy/test` sets
//! them; `deploy/local/stack env` prints them), by default the stack's port 9094 and its
//! files under `$HOOKLINE_DATA_DIR/secure`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hookline_kafka::{KafkaSettings, Registry};
use hookline_producer::{Encoding, Publisher, PublisherConfig};
use hookline_testkit::{Receiver, Reply, TestTopics, registry_settings, unique_name, wait_until};
use tokio_util::sync::CancellationToken;

use crate::harness::{DEADLINE, Harness, SECRET, event};

/// The stack's data dir, as `deploy/local/stack` derives it.
fn stack_data_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("HOOKLINE_DATA_DIR") {
        return PathBuf::from(dir);
    }
    let home = std::env::var("HOOKLINE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/hookline")
        });
    home.join("data")
}

/// A file of the secured listener: from `variable`, else the stack's `secure/<name>`.
/// Missing, the test fails saying how to get it (it does not skip).
fn stack_file(variable: &str, name: &str) -> PathBuf {
    let path = std::env::var(variable)
        .map(PathBuf::from)
        .unwrap_or_else(|_| stack_data_dir().join("secure").join(name));
    assert!(
        path.is_file(),
        "{} ({variable}) does not exist: start the local stack with its SASL_SSL listener \
         (`deploy/local/stack up`, or `deploy/local/stack restart kafka` for one started \
         before the listener existed), or set {variable}",
        path.display()
    );
    path
}

/// Settings for the SASL_SSL listener with `password` (a value or a reference).
fn secure_settings(password: &str) -> KafkaSettings {
    let port = std::env::var("HOOKLINE_KAFKA_SECURE_PORT").unwrap_or_else(|_| "9094".to_owned());
    let bootstrap = std::env::var("HOOKLINE_TEST_SECURE_BOOTSTRAP")
        .unwrap_or_else(|_| format!("127.0.0.1:{port}"));
    let ca = stack_file("HOOKLINE_TEST_KAFKA_CA", "ca.pem");
    let mut settings = KafkaSettings::new(bootstrap);
    for (key, value) in [
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.username", "hookline"),
        ("sasl.password", password),
        ("ssl.ca.location", &ca.to_string_lossy()),
    ] {
        settings.properties.insert(key.to_owned(), value.to_owned());
    }
    settings
}

/// The password as a `${file:...}` reference, so that it is never in the settings.
fn password_reference() -> String {
    let file = stack_file("HOOKLINE_TEST_KAFKA_PASSWORD_FILE", "hookline.password");
    format!("${{file:{}}}", file.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn publish_and_dispatch_through_sasl_ssl_only() {
    let kafka = secure_settings(&password_reference());
    kafka.validate().expect("the secured settings are valid");
    // Every client of this test, the topic admin included, uses the secured listener.
    let topics = TestTopics::new("secure", &["200ms", "500ms", "1s"]);
    topics.create(&kafka, 1).await;
    let mut h = Harness {
        registry: Arc::new(Registry::new(&registry_settings()).expect("registry")),
        receiver: Receiver::start().await,
        producer: kafka.producer_config().create().expect("secured producer"),
        shutdown: CancellationToken::new(),
        running: None,
        topics,
        kafka: kafka.clone(),
    };
    let url = h.receiver.script("secure", |_| Reply::Status(204));
    h.put_endpoint(
        "ep-secure",
        serde_json::json!({ "url": url, "secrets": [SECRET] }),
    )
    .await;
    h.start(h.config()).await;

    let publisher = Publisher::new(
        &kafka,
        Some(h.registry.clone()),
        PublisherConfig::new(&h.topics.events, Encoding::Avro),
    )
    .expect("publisher");
    let sent = event("ep-secure", 1);
    publisher
        .publish(&sent)
        .await
        .expect("published through SASL_SSL");

    wait_until(DEADLINE, "the webhook through SASL_SSL", || async {
        (h.receiver.count("secure") >= 1).then_some(())
    })
    .await;
    let received = h.receiver.received("secure");
    assert_eq!(
        received[0].header("webhook-id"),
        Some(sent.event_id.as_str())
    );
    assert_eq!(received[0].body.as_ref(), sent.payload.as_slice());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_fails_without_showing_it() {
    let wrong = format!("wrong-{}", unique_name("password"));
    let mut kafka = secure_settings(&wrong);
    // Fail within seconds rather than after the default 30 s.
    kafka
        .properties
        .insert("message.timeout.ms".to_owned(), "5000".to_owned());
    assert!(!format!("{kafka:?}").contains(&wrong), "{kafka:?}");
    let publisher = Publisher::new(
        &kafka,
        None,
        PublisherConfig::new(unique_name("secure-refused"), Encoding::Json),
    )
    .expect("publisher");
    let error = tokio::time::timeout(
        Duration::from_secs(30),
        publisher.publish(&event("ep-refused", 1)),
    )
    .await
    .expect("the publish fails within its message timeout")
    .expect_err("a wrong password is refused");
    let mut shown = format!("{error:?}");
    let mut source: Option<&dyn std::error::Error> = Some(&error);
    while let Some(cause) = source {
        shown.push_str(&format!("\n{cause}"));
        source = cause.source();
    }
    assert!(
        !shown.contains(&wrong),
        "the error shows the password: {shown}"
    );
}
