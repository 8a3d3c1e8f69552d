//! The text of a failed attempt never holds the URL's query string: it goes into logs, the
//! `hookline-last-error` retry header and the DLQ's `error_message`.
//!
//! Its sender and request are those of the client's other tests (`trust`, `wire`) too.

use std::sync::Arc;
use std::time::Duration;

use hookline_core::url_guard::AddressPolicy;
use hyper::header::HeaderValue;

use super::request::OutboundRequest;
use super::{ClientFactory, HttpSender, Roots};

/// The User-Agent of the tests' senders.
pub(super) const USER_AGENT: &str = "hookline-test";

/// The default policy with loopback allowed: the tests' receivers are on it.
pub(super) fn loopback() -> AddressPolicy {
    AddressPolicy {
        allow_loopback: true,
        ..AddressPolicy::default()
    }
}

/// A sender under `policy` that trusts `roots` besides the system's and reads at most
/// `max_response_bytes` of an answer, built as the dispatcher builds its own.
pub(super) fn sender_with(
    policy: AddressPolicy,
    roots: Roots,
    max_response_bytes: usize,
) -> HttpSender {
    let factory = ClientFactory::new(
        Arc::new(policy),
        HeaderValue::from_static(USER_AGENT),
        roots,
    );
    HttpSender::new(&factory, max_response_bytes).expect("a client")
}

fn sender() -> HttpSender {
    sender_with(loopback(), Roots::default(), 1024)
}

/// A POST of `{}` to `url`, with no headers of its own.
pub(super) fn request(url: String) -> OutboundRequest {
    OutboundRequest {
        url: reqwest::Url::parse(&url).expect("a URL"),
        url_overridden: false,
        headers: reqwest::header::HeaderMap::new(),
        body: b"{}".to_vec(),
        authorization: None,
    }
}

#[tokio::test]
async fn a_refused_connection_is_told_without_the_query_string() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://127.0.0.1:{port}/hook?token=SECRETVALUE");
    let attempt = sender()
        .send(None, request(url), Duration::from_secs(5))
        .await;
    assert!(attempt.status().is_none(), "{}", attempt.detail);
    assert!(
        !attempt.detail.contains("SECRETVALUE"),
        "{}",
        attempt.detail
    );
    assert!(!attempt.detail.is_empty());
}

#[tokio::test]
async fn a_refused_address_is_told_without_the_query_string() {
    // The guarded resolver refuses loopback for this client: the error comes from it.
    let sender = sender_with(AddressPolicy::default(), Roots::default(), 1024);
    let url = "http://localhost:9/hook?token=SECRETVALUE".to_owned();
    let attempt = sender
        .send(None, request(url), Duration::from_secs(5))
        .await;
    assert!(
        !attempt.detail.contains("SECRETVALUE"),
        "{}",
        attempt.detail
    );
    assert!(attempt.detail.contains("refused"), "{}", attempt.detail);
}
