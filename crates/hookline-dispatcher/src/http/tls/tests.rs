//! Tests of the endpoint TLS material, with certificates made by the testkit's PKI.

use hookline_core::endpoint::EndpointConfig;
use hookline_core::secret::Secret;
use hookline_testkit::TestPki;

use super::*;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn with(cert: &str, key: &str) -> EndpointConfig {
    EndpointConfig {
        client_certificate: Some(cert.to_owned()),
        client_key: Some(Secret::new(key)),
        ..EndpointConfig::new("https://example.com/hook", vec![SECRET.into()])
    }
}

fn error_of(config: &EndpointConfig) -> TlsError {
    endpoint_tls(config).expect_err("refused")
}

#[test]
fn a_matching_certificate_and_key_make_an_identity() {
    let pki = TestPki::new("hookline test CA");
    let client = pki.client("dispatcher-1");
    let tls = endpoint_tls(&with(&client.certificate_pem, &client.key_pem))
        .expect("valid")
        .expect("material");
    assert!(tls.identity.is_some());
    assert!(tls.roots.is_empty());
    let ca_only = EndpointConfig {
        server_ca: Some(pki.ca_pem()),
        ..EndpointConfig::new("https://example.com/hook", vec![SECRET.into()])
    };
    let tls = endpoint_tls(&ca_only).expect("valid").expect("material");
    assert_eq!((tls.identity.is_none(), tls.roots.len()), (true, 1));
    let plain = EndpointConfig::new("https://example.com/hook", vec![SECRET.into()]);
    assert!(endpoint_tls(&plain).expect("valid").is_none());
}

#[test]
fn bad_material_is_refused_naming_the_field_and_never_the_key() {
    let pki = TestPki::new("hookline test CA");
    let client = pki.client("dispatcher-1");
    let other = pki.client("someone-else");
    let garbage_cert = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n";
    let error = error_of(&with(garbage_cert, &client.key_pem));
    assert_eq!(error.field, "client_certificate", "{error}");
    // A key body that is not a key: the error must not echo any of it.
    let garbage_key = "-----BEGIN PRIVATE KEY-----\nU0VDUkVUU0VDUkVU\n-----END PRIVATE KEY-----\n";
    let error = error_of(&with(&client.certificate_pem, garbage_key));
    assert_eq!(error.field, "client_key", "{error}");
    assert!(!error.to_string().contains("U0VDUkVU"), "{error}");
    let error = error_of(&with(&client.certificate_pem, &other.key_pem));
    assert_eq!(error.field, "client_key");
    assert!(error.reason.contains("does not belong"), "{error}");
    let key_body: String = other.key_pem.lines().nth(1).unwrap_or_default().to_owned();
    assert!(!error.to_string().contains(&key_body), "{error}");
    let bad_ca = EndpointConfig {
        server_ca: Some(garbage_cert.to_owned()),
        ..EndpointConfig::new("https://example.com/hook", vec![SECRET.into()])
    };
    assert_eq!(error_of(&bad_ca).field, "server_ca");
}
