//! The registry behind an authenticating TLS proxy (testkit `AuthProxy`, in front of the
//! real registry): basic authentication or a bearer token, the proxy's private CA from
//! `registry.ca_file`, and refusals that say what the registry answered without showing a
//! secret.

use hookline_core::envelope::{DlqEnvelope, ErrorReason};
use hookline_core::schema::WEBHOOK_EVENT_CURRENT;
use hookline_core::secret::Secret;
use hookline_kafka::{Registry, RegistrySettings};
use hookline_testkit::{AuthProxy, Credentials, read_all, registry_settings, unique_name};
use rdkafka::message::Message;
use tokio_util::sync::CancellationToken;

use crate::harness::{DEADLINE, Harness, event};

const USERNAME: &str = "hookline";
const PASSWORD: &str = "reg-pw-5b7e1c9a";
const WRONG_PASSWORD: &str = "reg-pw-wrong-0d3f";
const TOKEN: &str = "reg-token-a41f77e2";

async fn basic_proxy() -> AuthProxy {
    AuthProxy::start(
        &registry_settings().url,
        Credentials::Basic {
            username: USERNAME.to_owned(),
            password: PASSWORD.to_owned(),
        },
    )
    .await
}

/// Settings for the registry through `proxy`, trusting its CA, without credentials.
fn through(proxy: &AuthProxy) -> RegistrySettings {
    RegistrySettings {
        url: proxy.url().to_owned(),
        ca_file: Some(proxy.ca_file().to_owned()),
        ..registry_settings()
    }
}

fn with_basic(proxy: &AuthProxy, password: &str) -> RegistrySettings {
    RegistrySettings {
        username: Some(USERNAME.to_owned()),
        password: Some(Secret::new(password)),
        ..through(proxy)
    }
}

/// An error and its causes, as the binary prints them.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn assert_no_secret(text: &str) {
    for secret in [PASSWORD, WRONG_PASSWORD, TOKEN] {
        assert!(!text.contains(secret), "a secret in: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_basic_auth_and_the_ca_a_dispatcher_parks_and_its_envelope_decodes_through_the_proxy()
{
    let mut h = Harness::new("reg-basic").await;
    let proxy = basic_proxy().await;
    let settings = with_basic(&proxy, PASSWORD);
    let mut config = h.config();
    config.registry = settings.clone();
    h.start(config).await;
    // Start-up registered the DLQ schema and set its compatibility through the proxy.
    assert!(
        proxy.authorized() > 0,
        "start-up did not go through the proxy"
    );

    let (partition, offset) = h
        .publish_bytes("ep-any", b"{\"event_type\": no json here", None)
        .await;
    let parked = read_all(&h.kafka, &h.topics.dlq, 1, DEADLINE).await;
    let bytes = parked[0].payload().expect("a DLQ value");
    let registry = Registry::new(&settings).expect("a client through the proxy");
    let before = proxy.authorized();
    let value = registry
        .decode(bytes)
        .await
        .expect("the envelope decodes through the proxy");
    assert!(
        proxy.authorized() > before,
        "the writer schema came through the proxy"
    );
    let envelope = DlqEnvelope::from_avro_value(value).expect("a DLQ envelope");
    assert_eq!(envelope.error_reason, ErrorReason::MalformedEvent);
    // A malformed event is named by where it was read.
    assert_eq!(
        envelope.event_id,
        format!("{}/{partition}/{offset}", h.topics.events)
    );
    assert_eq!(proxy.refused(), 0, "every request carried the credentials");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_a_bearer_token_schemas_register_and_values_encode_and_decode() {
    let proxy = AuthProxy::start(&registry_settings().url, Credentials::Bearer(TOKEN.into())).await;
    let settings = RegistrySettings {
        token: Some(Secret::new(TOKEN)),
        ..through(&proxy)
    };
    let registry = Registry::new(&settings).expect("a client through the proxy");
    let subject = format!("{}-value", unique_name("reg-bearer"));
    let id = registry
        .register(&subject, WEBHOOK_EVENT_CURRENT)
        .await
        .expect("registered through the proxy");
    // Encoding goes through the converter's own client: it must carry the token and trust
    // the CA too.
    let topic = unique_name("reg-bearer-topic");
    let sent = event("ep-bearer", 1);
    let bytes = registry
        .encode_value(&topic, WEBHOOK_EVENT_CURRENT, sent.to_avro_value())
        .await
        .expect("encoded through the proxy");
    assert_eq!(bytes[0], 0, "Confluent framing");
    assert_eq!(
        u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]),
        id,
        "the same schema has the same id under the topic's subject"
    );
    let fresh = Registry::new(&settings).expect("a second client");
    let value = fresh
        .decode(&bytes)
        .await
        .expect("decoded through the proxy");
    let received = hookline_core::WebhookEvent::from_avro_value(value).expect("an event");
    assert_eq!(received.event_id, sent.event_id);
    assert!(proxy.authorized() >= 3);
    assert_eq!(proxy.refused(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_credentials_or_with_wrong_ones_start_up_fails_saying_401_without_the_secret() {
    let h = Harness::new("reg-refused").await;
    let proxy = basic_proxy().await;
    let token_proxy =
        AuthProxy::start(&registry_settings().url, Credentials::Bearer(TOKEN.into())).await;
    let wrong_token = RegistrySettings {
        token: Some(Secret::new(format!("{TOKEN}-old"))),
        ..through(&token_proxy)
    };
    for settings in [
        through(&proxy),
        with_basic(&proxy, WRONG_PASSWORD),
        wrong_token,
    ] {
        let shown = format!("{settings:?}");
        let mut config = h.config();
        config.registry = settings;
        let settings = config.into_settings().expect("valid settings");
        let refused = hookline_dispatcher::start(settings, CancellationToken::new())
            .await
            .err()
            .expect("the registry refuses the dispatcher");
        let message = chain(&refused);
        assert!(
            message.contains("schema registry refused") && message.contains("HTTP 401"),
            "{message}"
        );
        assert_no_secret(&message);
        assert_no_secret(&format!("{refused:?}"));
        assert_no_secret(&shown);
    }
    assert!(proxy.refused() >= 2 && token_proxy.refused() >= 1);
    assert_eq!(proxy.authorized() + token_proxy.authorized(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_ca_the_proxy_certificate_is_not_trusted() {
    let proxy = basic_proxy().await;
    let settings = RegistrySettings {
        ca_file: None,
        ..with_basic(&proxy, PASSWORD)
    };
    let error = Registry::new(&settings)
        .expect("a client")
        .ping()
        .await
        .expect_err("an unknown CA is refused");
    let message = chain(&error);
    assert!(message.contains(proxy.url()), "{message}");
    assert_no_secret(&message);
    assert_eq!(proxy.authorized(), 0);
    // And with it, the same settings work.
    Registry::new(&with_basic(&proxy, PASSWORD))
        .expect("a client")
        .ping()
        .await
        .expect("the CA file is trusted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_url_with_credentials_is_refused_at_start_up_naming_the_field() {
    let h = Harness::new("reg-userinfo").await;
    let proxy = basic_proxy().await;
    let mut config = h.config();
    config.registry = through(&proxy);
    config.registry.url =
        proxy
            .url()
            .replacen("https://", &format!("https://{USERNAME}:{PASSWORD}@"), 1);
    let refused = config.into_settings().expect_err("refused");
    let message = chain(&refused);
    assert!(message.contains("registry.url"), "{message}");
    assert!(message.contains("registry.username"), "{message}");
    assert_no_secret(&message);
    assert_no_secret(&format!("{refused:?}"));
    assert_eq!(proxy.authorized() + proxy.refused(), 0, "nothing was sent");
}
