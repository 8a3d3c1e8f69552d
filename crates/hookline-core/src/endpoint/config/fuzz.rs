//! Outside input never panics the endpoint config reader (the value of a record in the
//! compacted endpoints topic): arbitrary bytes and JSON values, and valid configs with fields
//! removed, retyped or given edge values. A config that validates survives its JSON form.

use proptest::prelude::*;

use super::*;
use crate::fuzz::{
    byte_edits, bytes, config, edge_number, edited_bytes, edited_object, json_value, object_edits,
};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const WHSK: &str =
    "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";

const FIELDS: &[&str] = &[
    "url",
    "secrets",
    "signing_keys",
    "enabled",
    "disabled_reason",
    "disabled_at_ms",
    "max_concurrency",
    "rate_limit_per_s",
    "timeout_ms",
    "retry",
    "strict_ordering",
    "headers",
];

const RETRY_FIELDS: &[&str] = &[
    "strategy",
    "base_ms",
    "cap_ms",
    "max_attempts",
    "max_age_ms",
];

fn json(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

fn url() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("https://example.com/hook?k=v".to_owned()),
        Just("http://[::1]:99999/".to_owned()),
        Just("http://user:pw@example.com/".to_owned()),
        Just("https://xn--n3h.example/".to_owned()),
        Just("https://169.254.169.254/latest".to_owned()),
        Just("http://0x7f.1/".to_owned()),
        "(https?|ftp|file|data)://[a-z0-9.:@\\[\\]%/?#-]{0,40}",
        any::<String>(),
    ]
}

fn secret() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(SECRET.to_owned()),
        "whsec_[A-Za-z0-9+/=]{0,64}",
        any::<String>(),
    ]
}

fn signing_key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(WHSK.to_owned()),
        "whsk_[A-Za-z0-9+/=]{0,100}",
        "whpk_[A-Za-z0-9+/=]{0,50}",
        any::<String>(),
    ]
}

/// A valid config, field by field as raw JSON, with `retry` edited.
fn valid_fields(retry: String) -> Vec<(&'static str, String)> {
    vec![
        ("url", json("https://example.com/hook")),
        ("secrets", format!("[{}]", json(SECRET))),
        ("signing_keys", format!("[{}]", json(WHSK))),
        ("enabled", "false".to_owned()),
        ("disabled_reason", json("gone: HTTP 410")),
        ("disabled_at_ms", "1796119200000".to_owned()),
        ("max_concurrency", "4".to_owned()),
        ("rate_limit_per_s", "2.5".to_owned()),
        ("timeout_ms", "10000".to_owned()),
        ("retry", retry),
        ("strict_ordering", "false".to_owned()),
        ("headers", r#"{"X-Tenant":"acme"}"#.to_owned()),
    ]
}

fn retry() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        3 => edge_number(),
        1 => Just(json("fixed")),
        1 => Just(json("full_jitter")),
        1 => Just(json("nope")),
        1 => Just("null".to_owned()),
    ];
    proptest::collection::vec((proptest::sample::select(RETRY_FIELDS), value), 0..6).prop_map(
        |fields| {
            let body: Vec<String> = fields
                .iter()
                .map(|(name, value)| format!("{}:{value}", json(name)))
                .collect();
            format!("{{{}}}", body.join(","))
        },
    )
}

fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let _ = EndpointConfig::from_json(bytes);
    if let Ok(config) = serde_json::from_slice::<EndpointConfig>(bytes) {
        let _ = format!("{config:?}");
        if let Ok(endpoint) = config.to_endpoint() {
            let _ = format!("{endpoint:?}");
            let back = EndpointConfig::from_json(&config.to_json());
            prop_assert_eq!(back.ok(), Some(config));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn arbitrary_bytes(bytes in bytes()) {
        check(&bytes)?;
    }

    #[test]
    fn arbitrary_json_values(value in json_value()) {
        check(value.to_string().as_bytes())?;
    }

    #[test]
    fn valid_configs_with_edited_fields(
        retry in retry(),
        url in url(),
        secrets in proptest::collection::vec(secret(), 0..12),
        keys in proptest::collection::vec(signing_key(), 0..12),
        edits in object_edits(FIELDS),
    ) {
        let mut fields = valid_fields(retry);
        fields[0].1 = json(&url);
        if !keys.is_empty() {
            let keys: Vec<String> = keys.iter().map(|k| json(k)).collect();
            fields[2].1 = format!("[{}]", keys.join(","));
        }
        if !secrets.is_empty() {
            let secrets: Vec<String> = secrets.iter().map(|s| json(s)).collect();
            fields[1].1 = format!("[{}]", secrets.join(","));
        }
        check(edited_object(&fields, &edits).as_bytes())?;
    }

    #[test]
    fn valid_configs_with_edited_bytes(edits in byte_edits(4)) {
        let config = EndpointConfig {
            retry: Some(PolicyOverride { base_ms: Some(100), ..PolicyOverride::default() }),
            rate_limit_per_s: Some(2.5),
            ..EndpointConfig::new("https://example.com/hook", vec![SECRET.into()])
        };
        check(&edited_bytes(&config.to_json(), &edits))?;
    }
}
