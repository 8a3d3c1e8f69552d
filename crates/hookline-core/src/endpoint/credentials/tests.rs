//! Tests of the endpoint credential fields.

use super::*;
use crate::endpoint::EndpointConfig;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nTOPSECRETKEYMATERIAL\n-----END PRIVATE KEY-----\n";
const TOKEN: &str = "tok_9f8e7d6c5b4a39281706";

fn config() -> EndpointConfig {
    EndpointConfig::new("https://example.com/hook", vec![SECRET.into()])
}

fn field_of(f: impl FnOnce(&mut EndpointConfig)) -> String {
    let mut c = config();
    f(&mut c);
    match c.validate() {
        Err(EndpointError::Invalid { field, reason }) => {
            assert!(
                !reason.contains("TOPSECRET") && !reason.contains(TOKEN),
                "{reason}"
            );
            field
        }
        other => panic!("expected a field error, got {other:?}"),
    }
}

#[test]
fn credentials_round_trip_through_the_topic_json() {
    let json = format!(
        r#"{{"url":"https://example.com/hook","secrets":["{SECRET}"],
        "client_certificate":{cert},"client_key":{key},"server_ca":{cert},
        "auth":{{"type":"bearer","token":"{TOKEN}"}}}}"#,
        cert = serde_json::to_string(CERT).expect("json"),
        key = serde_json::to_string(KEY).expect("json"),
    );
    let c = EndpointConfig::from_json(json.as_bytes()).expect("valid");
    assert_eq!(c.client_key.as_ref().map(Secret::expose), Some(KEY));
    assert_eq!(
        c.auth
            .as_ref()
            .map(|a| a.header_value().expose().to_owned()),
        Some(format!("Bearer {TOKEN}"))
    );
    assert_eq!(
        EndpointConfig::from_json(&c.to_json()).expect("round trip"),
        c
    );
    // Debug shows neither the key nor the token.
    let debug = format!("{c:?}");
    assert!(
        !debug.contains("TOPSECRET") && !debug.contains(TOKEN),
        "{debug}"
    );
    assert!(debug.contains("client_key: Some(<redacted>)"), "{debug}");
}

#[test]
fn basic_auth_is_encoded() {
    let auth: ReceiverAuth =
        serde_json::from_str(r#"{"type":"basic","username":"Aladdin","password":"open sesame"}"#)
            .expect("basic");
    assert_eq!(
        auth.header_value().expose(),
        "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
    );
    assert_eq!(auth.kind(), "basic");
    assert!(!format!("{auth:?}").contains("sesame"));
}

#[test]
fn stored_configs_refuse_secret_references() {
    for json in [
        r#"{"url":"https://e.example/","secrets":["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],"auth":{"type":"bearer","token":"${file:/etc/shadow}"}}"#,
        r#"{"url":"https://e.example/","secrets":["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],"client_certificate":"x","client_key":"${env:HOME}"}"#,
    ] {
        let error = EndpointConfig::from_json(json.as_bytes()).expect_err(json);
        assert!(error.to_string().contains("references"), "{error}");
    }
}

#[test]
fn bad_credentials_name_their_field() {
    let bearer = |token: &str| ReceiverAuth::Bearer {
        token: Secret::new(token),
    };
    assert_eq!(
        field_of(|c| c.client_certificate = Some(CERT.into())),
        "client_key"
    );
    assert_eq!(
        field_of(|c| c.client_key = Some(Secret::new(KEY))),
        "client_certificate"
    );
    assert_eq!(
        field_of(|c| {
            c.client_certificate = Some("not pem".into());
            c.client_key = Some(Secret::new(KEY));
        }),
        "client_certificate"
    );
    assert_eq!(
        field_of(|c| {
            c.client_certificate = Some(CERT.into());
            c.client_key = Some(Secret::new("TOPSECRET but not PEM"));
        }),
        "client_key"
    );
    assert_eq!(
        field_of(|c| {
            c.url = "http://example.com/hook".into();
            c.client_certificate = Some(CERT.into());
            c.client_key = Some(Secret::new(KEY));
        }),
        "client_certificate"
    );
    assert_eq!(field_of(|c| c.server_ca = Some(KEY.into())), "server_ca");
    assert_eq!(field_of(|c| c.auth = Some(bearer(""))), "auth.token");
    assert_eq!(
        field_of(|c| c.auth = Some(bearer(&format!("{TOKEN}\r\nX-Evil: 1")))),
        "auth.token"
    );
    assert_eq!(
        field_of(|c| {
            c.auth = Some(ReceiverAuth::Basic {
                username: "a:b".into(),
                password: Secret::new("pw"),
            })
        }),
        "auth.username"
    );
    // A custom Authorization header and `auth` conflict, whatever the header's case.
    assert_eq!(
        field_of(|c| {
            c.auth = Some(bearer(TOKEN));
            c.headers
                .insert("authorization".into(), "Bearer other".into());
        }),
        "headers.authorization"
    );
    let mut fine = config();
    fine.auth = Some(bearer(TOKEN));
    fine.headers.insert("X-Tenant".into(), "acme".into());
    fine.validate().expect("other headers are fine");
}

#[test]
fn hints_show_at_most_four_characters() {
    assert_eq!(secret_hint(&Secret::new(TOKEN)), "…1706");
    assert_eq!(secret_hint(&Secret::new("short")), "…");
}
