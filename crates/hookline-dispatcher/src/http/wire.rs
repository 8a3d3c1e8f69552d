//! What a receiver gets from the delivery client, and what the client makes of its answer:
//! the request's headers and body as built, with the User-Agent, `accept`, the credential,
//! the length and the host; the answer's status, `Retry-After` and the start of its body.

use std::time::Duration;

use hookline_core::classify::AttemptOutcome;
use hookline_core::secret::Secret;
use hookline_testkit::{Receiver, Reply};
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderValue};

use super::leaks::{USER_AGENT, loopback, sender_with};
use super::request::OutboundRequest;
use super::{HttpSender, Roots};

fn sender(max_response_bytes: usize) -> HttpSender {
    sender_with(loopback(), Roots::default(), max_response_bytes)
}

fn post(url: &str, body: &[u8], authorization: Option<Secret>) -> OutboundRequest {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert("webhook-id", HeaderValue::from_static("msg_wire"));
    OutboundRequest {
        url: reqwest::Url::parse(url).expect("a URL"),
        url_overridden: false,
        headers,
        body: body.to_vec(),
        authorization,
    }
}

#[tokio::test]
async fn the_receiver_gets_the_headers_the_body_and_who_sent_them() {
    let receiver = Receiver::start().await;
    let url = receiver.script("wire", |_| Reply::Status(204));
    let body = br#"{"invoice":42}"#;
    let request = post(&url, body, Some(Secret::new("Bearer wire-token")));
    let attempt = sender(1024)
        .send(None, request, Duration::from_secs(5))
        .await;
    assert_eq!(attempt.status(), Some(204), "{}", attempt.detail);
    assert_eq!(attempt.detail, "HTTP 204");

    let received = receiver.received("wire");
    assert_eq!(received.len(), 1);
    let got = &received[0];
    assert_eq!(&got.body[..], body);
    assert_eq!(got.header("content-type"), Some("application/json"));
    assert_eq!(got.header("webhook-id"), Some("msg_wire"));
    assert_eq!(got.header("authorization"), Some("Bearer wire-token"));
    assert_eq!(got.header("user-agent"), Some(USER_AGENT));
    assert_eq!(got.header("accept"), Some("*/*"));
    let length = body.len().to_string();
    assert_eq!(got.header("content-length"), Some(length.as_str()));
    let host = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .expect("a host");
    assert_eq!(got.header("host"), Some(host));
}

#[tokio::test]
async fn an_answer_keeps_its_status_its_retry_after_and_the_start_of_its_body() {
    let receiver = Receiver::start().await;
    let sender = sender(64);

    let url = receiver.script("busy", |_| Reply::TooManyRequests { retry_after_s: 7 });
    let attempt = sender
        .send(None, post(&url, b"{}", None), Duration::from_secs(5))
        .await;
    assert_eq!(
        attempt.outcome,
        AttemptOutcome::Response {
            status: 429,
            retry_after: Some(Duration::from_secs(7)),
        },
        "{}",
        attempt.detail
    );

    let long = "failing ".repeat(100);
    let url = receiver.script("broken", move |_| Reply::Body {
        status: 500,
        body: long.clone(),
    });
    let attempt = sender
        .send(None, post(&url, b"{}", None), Duration::from_secs(5))
        .await;
    assert_eq!(attempt.status(), Some(500));
    assert!(
        attempt.detail.starts_with("HTTP 500: failing failing"),
        "{}",
        attempt.detail
    );
    // The limit is reached (reading stops at the frame that reaches it).
    assert!(attempt.body.len() >= 64, "{}", attempt.body.len());
    assert!(attempt.body.starts_with(b"failing failing"));
}
