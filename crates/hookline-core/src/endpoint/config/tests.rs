use super::*;
use crate::policy::StrategyKind;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn config() -> EndpointConfig {
    EndpointConfig::new("https://example.com/hook", vec![SECRET.into()])
}

fn field_of(f: impl FnOnce(&mut EndpointConfig)) -> String {
    let mut c = config();
    f(&mut c);
    match c.validate() {
        Err(EndpointError::Invalid { field, .. }) => field,
        Err(EndpointError::Url(_)) => "url".into(),
        Err(EndpointError::Secret { index, .. }) => format!("secrets[{index}]"),
        Err(EndpointError::SigningKey { index, .. }) => format!("signing_keys[{index}]"),
        Err(EndpointError::Retry(e)) => e.to_string(),
        Err(EndpointError::Json(e)) => panic!("unexpected JSON error {e}"),
        Ok(()) => panic!("expected an error"),
    }
}

#[test]
fn subscriptions_are_checked_naming_the_field() {
    let json = format!(
        r#"{{"url":"https://example.com/hook","secrets":["{SECRET}"],"tenant":"acme",
        "event_types":["invoice.*","customer.created"],"channels":["eu"],
        "description":"billing"}}"#
    );
    let c = EndpointConfig::from_json(json.as_bytes()).expect("valid");
    let subscription = c.subscription().expect("a tenant's endpoint");
    assert_eq!(subscription.tenant, "acme");
    assert!(!subscription.wants("invoice.paid", &[]));
    assert!(subscription.wants("invoice.paid", &["eu".to_owned()]));
    assert_eq!(
        EndpointConfig::from_json(&c.to_json()).expect("round trip"),
        c
    );
    assert!(config().subscription().is_none());
    let with_tenant = |c: &mut EndpointConfig| c.tenant = Some("acme".into());
    assert_eq!(
        field_of(|c| c.event_types = vec!["a".into()]),
        "event_types"
    );
    assert_eq!(field_of(|c| c.channels = vec!["a".into()]), "channels");
    assert_eq!(field_of(|c| c.tenant = Some(String::new())), "tenant");
    assert_eq!(
        field_of(|c| {
            with_tenant(c);
            c.event_types = vec!["invoice.paid".into(), "inv*".into()];
        }),
        "event_types[1]"
    );
    assert_eq!(
        field_of(|c| {
            with_tenant(c);
            c.channels = vec!["a b".into()];
        }),
        "channels[0]"
    );
    assert_eq!(
        field_of(|c| c.description = Some("x".repeat(MAX_DESCRIPTION_LEN + 1))),
        "description"
    );
}

#[test]
fn full_json_parses_and_converts() {
    let json = format!(
        r#"{{"url":"https://example.com/hook?k=v","secrets":["{SECRET}"],"enabled":false,
        "max_concurrency":4,"rate_limit_per_s":2.5,"timeout_ms":10000,
        "retry":{{"strategy":"fixed","base_ms":1000,"max_attempts":3}},
        "strict_ordering":true,"headers":{{"X-Tenant":"acme"}}}}"#
    );
    let c = EndpointConfig::from_json(json.as_bytes()).expect("valid");
    assert!(!c.enabled && c.strict_ordering);
    let e = c.to_endpoint().expect("valid");
    assert_eq!(e.timeout, Some(Duration::from_secs(10)));
    assert_eq!(e.max_concurrency.map(NonZeroU32::get), Some(4));
    assert_eq!(e.secrets.len(), 1);
    assert_eq!(
        e.retry.as_ref().and_then(|r| r.strategy),
        Some(StrategyKind::Fixed)
    );
    assert_eq!(
        EndpointConfig::from_json(&c.to_json()).expect("round trip"),
        c
    );
}

#[test]
fn minimal_json_takes_defaults() {
    let json = format!(r#"{{"url":"http://example.com/","secrets":["{SECRET}"]}}"#);
    let c = EndpointConfig::from_json(json.as_bytes()).expect("valid");
    assert_eq!(
        c,
        EndpointConfig::new("http://example.com/", vec![SECRET.into()])
    );
    assert!(c.enabled);
}

#[test]
fn unknown_fields_are_refused() {
    let json = format!(r#"{{"url":"http://example.com/","secrets":["{SECRET}"],"timeout":5}}"#);
    let err = EndpointConfig::from_json(json.as_bytes()).expect_err("unknown field");
    assert!(err.to_string().contains("timeout"), "{err}");
}

#[test]
fn validation_names_the_field() {
    assert_eq!(field_of(|c| c.url = "ftp://x/".into()), "url");
    assert_eq!(field_of(|c| c.secrets.clear()), "secrets");
    assert_eq!(field_of(|c| c.secrets.push("nope".into())), "secrets[1]");
    assert_eq!(field_of(|c| c.max_concurrency = Some(0)), "max_concurrency");
    assert_eq!(
        field_of(|c| c.rate_limit_per_s = Some(0.0)),
        "rate_limit_per_s"
    );
    assert_eq!(
        field_of(|c| c.rate_limit_per_s = Some(f64::NAN)),
        "rate_limit_per_s"
    );
    assert_eq!(
        field_of(|c| c.rate_limit_per_s = Some(1e-300)),
        "rate_limit_per_s",
        "a tiny rate is refused, not taken as no limit"
    );
    assert_eq!(field_of(|c| c.timeout_ms = Some(0)), "timeout_ms");
    assert_eq!(
        field_of(|c| c.timeout_ms = Some(MAX_TIMEOUT_MS + 1)),
        "timeout_ms"
    );
    assert!(
        field_of(|c| {
            c.retry = Some(PolicyOverride {
                max_attempts: Some(0),
                ..PolicyOverride::default()
            })
        })
        .contains("retry.max_attempts")
    );
    let header = |name: &str, value: &str| {
        let (name, value) = (name.to_owned(), value.to_owned());
        field_of(move |c| {
            c.headers.insert(name, value);
        })
    };
    assert_eq!(header("Bad Name", "v"), "headers.Bad Name");
    assert_eq!(
        header("Webhook-Signature", "v"),
        "headers.Webhook-Signature"
    );
    assert_eq!(header("X-A", "a\nb"), "headers.X-A");
}

#[test]
fn debug_never_shows_secrets_or_query() {
    let mut c = config();
    c.url = "https://example.com/hook?token=abc123".into();
    let text = format!("{c:?}");
    assert!(!text.contains("MfKQ"), "{text}");
    assert!(!text.contains("abc123"), "{text}");
    let endpoint = format!("{:?}", c.to_endpoint().expect("valid"));
    assert!(
        !endpoint.contains("MfKQ") && !endpoint.contains("abc123"),
        "{endpoint}"
    );
    let err = EndpointConfig::new("https://x.test/", vec!["whsec_!!".into()])
        .validate()
        .expect_err("invalid");
    assert!(!err.to_string().contains("!!"), "{err}");
}

/// An error's message with those of all its sources, as `{:#}` in anyhow shows it.
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

#[test]
fn a_json_type_error_names_the_field_and_never_the_value() {
    let json = format!(r#"{{"url":"https://example.com/hook","secrets":"{SECRET}"}}"#);
    let err = EndpointConfig::from_json(json.as_bytes()).expect_err("a string is not a list");
    let text = chain(&err);
    assert!(!text.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), "{text}");
    assert!(
        text.contains("`secrets`: invalid type, expected a sequence (line 1, column"),
        "{text}"
    );
    let json = format!(
        r#"{{"url":"https://example.com/hook","secrets":["{SECRET}"],
        "headers":{{"Authorization":["Bearer tok_live_TOPSECRET"]}}}}"#
    );
    let err = EndpointConfig::from_json(json.as_bytes()).expect_err("a list is not a value");
    let text = chain(&err);
    assert!(!text.contains("TOPSECRET"), "{text}");
    assert!(text.contains("`headers.Authorization`"), "{text}");
}

#[test]
fn url_overrides_are_off_unless_asked_for() {
    let json = format!(r#"{{"url":"https://example.com/hook","secrets":["{SECRET}"]}}"#);
    let c = EndpointConfig::from_json(json.as_bytes()).expect("valid");
    assert!(!c.allow_url_override);
    assert!(!c.to_endpoint().expect("valid").allow_url_override);
    assert!(
        !String::from_utf8_lossy(&c.to_json()).contains("allow_url_override"),
        "the default is left out of the record"
    );
    let json = format!(
        r#"{{"url":"https://example.com/hook","secrets":["{SECRET}"],"allow_url_override":true}}"#
    );
    let c = EndpointConfig::from_json(json.as_bytes()).expect("valid");
    assert!(c.to_endpoint().expect("valid").allow_url_override);
    assert_eq!(
        EndpointConfig::from_json(&c.to_json()).expect("round trip"),
        c
    );
}

#[test]
fn disabled_state_is_stored_and_checked() {
    let json = br#"{"url":"https://example.com/h","secrets":["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],"enabled":false,"disabled_reason":"gone: HTTP 410","disabled_at_ms":1796119200000}"#;
    let config = EndpointConfig::from_json(json).expect("valid");
    assert!(!config.enabled);
    assert_eq!(config.disabled_reason.as_deref(), Some("gone: HTTP 410"));
    assert_eq!(config.disabled_at_ms, Some(1_796_119_200_000));
    assert_eq!(
        EndpointConfig::from_json(&config.to_json()).ok(),
        Some(config)
    );

    assert_eq!(
        field_of(|c| c.disabled_reason = Some("a\nb".into())),
        "disabled_reason"
    );
    assert_eq!(
        field_of(|c| c.disabled_reason = Some("x".repeat(257))),
        "disabled_reason"
    );
    assert_eq!(field_of(|c| c.disabled_at_ms = Some(-1)), "disabled_at_ms");
}
