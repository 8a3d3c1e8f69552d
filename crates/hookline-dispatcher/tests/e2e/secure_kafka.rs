//! hookline through the stack's SASL_SSL listener only (TLS with the stack's CA,
//! SCRAM-SHA-512, the password given as a `${file:...}` reference): the `Publisher`
//! publishes, a dispatcher delivers, the receiver gets the webhook. A wrong password fails
//! without the password in the error.
//!
//! The listener is found through `HOOKLINE_TEST_SECURE_BOOTSTRAP`,
//! `HOOKLINE_TEST_KAFKA_CA` and `HOOKLINE_TEST_KAFKA_PASSWORD_FILE` (`deploy/test` sets
//! them; `deploy/local/stack env` prints them), by default the stack's port 9094 and its
//! files under `$HOOKLINE_DATA_DIR/secure`.

use std::sync::Arc;
use std::time::Duration;

use hookline_kafka::Registry;
use hookline_producer::{Encoding, Publisher, PublisherConfig};
use hookline_testkit::{
    Receiver, Reply, TestTopics, registry_settings, secure_kafka_settings, secure_password_file,
    unique_name, wait_until,
};
use tokio_util::sync::CancellationToken;

use crate::harness::{DEADLINE, Harness, SECRET, event};

/// The password as a `${file:...}` reference, so that it is never in the settings.
fn password_reference() -> String {
    let file = secure_password_file();
    format!("${{file:{}}}", file.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn publish_and_dispatch_through_sasl_ssl_only() {
    let kafka = secure_kafka_settings(&password_reference());
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
    let mut kafka = secure_kafka_settings(&wrong);
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
