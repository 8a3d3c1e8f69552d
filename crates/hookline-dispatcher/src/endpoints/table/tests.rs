//! Tests of the endpoint table's per-endpoint TLS clients.

use std::sync::Arc;

use hookline_core::breaker::BreakerPolicy;
use hookline_core::policy::RetryConfig;
use hookline_core::secret::Secret;
use hookline_core::url_guard::AddressPolicy;
use hookline_testkit::TestPki;

use super::*;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn table() -> EndpointTable {
    EndpointTable::new(EndpointDefaults {
        max_concurrency: 16,
        max_concurrency_share: 64,
        max_cap: Duration::from_secs(3600),
        timeout: Duration::from_secs(10),
        retry: RetryConfig::default().to_policy().expect("valid"),
        slow_after: Duration::from_secs(1),
        breaker: BreakerPolicy::default(),
        clients: ClientFactory::new(
            Arc::new(AddressPolicy::default()),
            hyper::header::HeaderValue::from_static("test"),
            crate::http::Roots::default(),
        ),
    })
}

fn mtls(cert: &str, key: &str) -> EndpointConfig {
    EndpointConfig {
        client_certificate: Some(cert.to_owned()),
        client_key: Some(Secret::new(key)),
        ..EndpointConfig::new("https://example.com/hook", vec![SECRET.into()])
    }
}

#[test]
fn an_endpoint_with_a_certificate_gets_its_own_client_and_a_bad_key_is_refused() {
    let pki = TestPki::new("table test CA");
    let client = pki.client("a");
    let other = pki.client("b");
    let table = table();
    table
        .upsert(
            "ep",
            EndpointConfig::new("https://example.com/hook", vec![SECRET.into()]),
        )
        .expect("plain");
    assert!(
        table.get("ep").expect("taken").client.is_none(),
        "shares the client"
    );
    table
        .upsert("ep", mtls(&client.certificate_pem, &client.key_pem))
        .expect("mTLS");
    assert!(table.get("ep").expect("taken").client.is_some());
    // A key of another certificate: refused naming the field; the endpoint keeps its config.
    let error = table
        .upsert("ep", mtls(&client.certificate_pem, &other.key_pem))
        .expect_err("mismatched key");
    assert!(error.reason.contains("client_key"), "{error}");
    let body = other.key_pem.lines().nth(1).expect("a line");
    assert!(!error.to_string().contains(body), "{error}");
    let kept = table.get("ep").expect("still there");
    assert_eq!(
        kept.config.client_key.as_ref().map(Secret::expose),
        Some(client.key_pem.as_str())
    );
    // Back to no certificate: back to the shared client.
    table
        .upsert(
            "ep",
            EndpointConfig::new("https://example.com/hook", vec![SECRET.into()]),
        )
        .expect("plain again");
    assert!(table.get("ep").expect("taken").client.is_none());
}

#[test]
fn debug_shows_header_names_but_no_values_secrets_or_query() {
    let table = table();
    let mut config = EndpointConfig::new(
        "https://example.com/hook?token=q_TOPSECRET",
        vec![SECRET.into()],
    );
    config
        .headers
        .insert("Authorization".into(), "Bearer tok_TOPSECRET".into());
    table.upsert("ep-1", config).expect("valid");
    let endpoint = table.get("ep-1").expect("taken");
    for text in [format!("{endpoint:?}"), format!("{table:?}")] {
        assert!(text.contains("Authorization"), "{text}");
        assert!(!text.contains("TOPSECRET"), "{text}");
        assert!(!text.contains("MfKQ9r8"), "{text}");
    }
}

#[test]
fn the_failing_clock_survives_a_config_change_and_restarts_when_enabled_again() {
    use hookline_core::classify::{Classification, FailureKind};

    use crate::settings::LifecycleSettings;

    let settings = LifecycleSettings {
        disable_after_failing: Some(Duration::from_secs(60)),
    };
    let failed = Classification::Retryable {
        reason: FailureKind::ServerError { status: 503 },
        retry_after: None,
    };
    let table = table();
    let plain = EndpointConfig::new("https://example.com/hook", vec![SECRET.into()]);
    table.upsert("ep", plain.clone()).expect("plain");
    let first = table.get("ep").expect("taken");
    first
        .lifecycle
        .lock()
        .expect("state")
        .observe(&failed, 1_000, &settings);

    // A change that keeps the endpoint keeps its clock (and its limits' state).
    let changed = EndpointConfig {
        max_concurrency: Some(2),
        description: Some("moved".into()),
        ..plain.clone()
    };
    table.upsert("ep", changed.clone()).expect("changed");
    let since = |table: &EndpointTable| {
        table
            .get("ep")
            .expect("taken")
            .lifecycle
            .lock()
            .expect("state")
            .failing_since_ms()
    };
    assert_eq!(since(&table), Some(1_000));
    assert_eq!(table.disabled_count(), 0);

    // Disabled, then enabled again: the clock starts afresh.
    let off = EndpointConfig {
        enabled: false,
        ..changed.clone()
    };
    table.upsert("ep", off.clone()).expect("disabled");
    assert_eq!(since(&table), Some(1_000));
    assert_eq!(table.disabled_count(), 1);
    table.upsert("ep", off).expect("disabled again");
    assert_eq!(table.disabled_count(), 1);
    table.upsert("ep", changed).expect("enabled");
    assert_eq!(since(&table), None);
    assert_eq!(table.disabled_count(), 0);

    table
        .upsert(
            "ep",
            EndpointConfig {
                enabled: false,
                ..plain
            },
        )
        .expect("disabled");
    assert_eq!(table.disabled_count(), 1);
    table.remove("ep");
    assert_eq!(table.disabled_count(), 0);
}
