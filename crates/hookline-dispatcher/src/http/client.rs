//! Sending one attempt over HTTP: no redirects, no proxy, a timeout, a bounded response
//! read, and the guarded resolver; the answer becomes an [`AttemptOutcome`] for
//! classification. Endpoints with TLS material of their own (a client certificate, a
//! private CA) get a client of their own, built by the same
//! [`ClientFactory`](super::ClientFactory).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hookline_core::classify::{AttemptOutcome, parse_retry_after};
use hookline_core::url_guard::redact_url;
use http_body_util::BodyExt as _;
use hyper::Uri;
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, HeaderValue, RETRY_AFTER};

use super::connect::{ClientFactory, DeliveryClient};
use super::guard::{GuardError, PrecheckCache};
use super::request::OutboundRequest;
use crate::error::ClientError;

/// What one attempt gave.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// The outcome to classify.
    pub outcome: AttemptOutcome,
    /// How long it took.
    pub took: Duration,
    /// A short human-readable account (status and the start of the body, or the error).
    pub detail: String,
    /// The start of the response body (at most `max_response_bytes`), for the attempt log.
    pub body: Vec<u8>,
    /// The `traceparent` the attempt sent, once known.
    pub traceparent: Option<String>,
}

impl Attempt {
    /// The HTTP status, when the endpoint answered.
    pub fn status(&self) -> Option<u16> {
        match self.outcome {
            AttemptOutcome::Response { status, .. } => Some(status),
            AttemptOutcome::Timeout | AttemptOutcome::Connect | AttemptOutcome::TooLarge => None,
        }
    }
}

/// The HTTP client of a dispatcher.
#[derive(Clone, Debug)]
pub struct HttpSender {
    client: DeliveryClient,
    max_response_bytes: usize,
    /// The pre-check's verdicts, shared by every delivery.
    prechecks: Arc<PrecheckCache>,
}

impl HttpSender {
    /// The shared client, built by `factory` without endpoint TLS material.
    pub fn new(factory: &ClientFactory, max_response_bytes: usize) -> Result<Self, ClientError> {
        Ok(HttpSender {
            client: factory.build(None)?,
            max_response_bytes,
            prechecks: Arc::new(PrecheckCache::new(Arc::clone(factory.policy()))),
        })
    }

    /// Whether `url` may be called (the address guard's pre-check), asked at most once per
    /// [`super::guard::PRECHECK_TTL`] for one URL; when it may, the URL parsed.
    pub async fn precheck(&self, url: &str) -> Result<reqwest::Url, GuardError> {
        self.prechecks.check(url).await
    }

    /// Sends `request` with `timeout` for the whole exchange. Once a status has arrived it
    /// stands: a body that then stalls or breaks only shortens the detail, so a 2xx whose
    /// body never ends is a delivery, not a retry (which would be a duplicate).
    /// `client` is the endpoint's own (mTLS, private CA), else the shared one is used.
    pub async fn send(
        &self,
        client: Option<&DeliveryClient>,
        request: OutboundRequest,
        timeout: Duration,
    ) -> Attempt {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        let client = client.unwrap_or(&self.client);
        let OutboundRequest {
            url,
            mut headers,
            body,
            authorization,
            ..
        } = request;
        if let Some(authorization) = authorization
            && let Ok(mut value) = HeaderValue::try_from(authorization.expose())
        {
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let failed = |outcome, detail| Attempt {
            outcome,
            took: started.elapsed(),
            detail,
            body: Vec::new(),
            traceparent: None,
        };
        let Ok(uri) = Uri::try_from(url.as_str()) else {
            let detail = format!("invalid URL for HTTP: {}", redact_url(url.as_str()));
            return failed(AttemptOutcome::Connect, detail);
        };
        let answered = tokio::time::timeout_at(deadline, client.post(uri, headers, body)).await;
        let response = match answered {
            Err(_) => {
                let detail = format!("no answer within {} ms", timeout.as_millis());
                return failed(AttemptOutcome::Timeout, detail);
            }
            Ok(Err(error)) => {
                return failed(AttemptOutcome::Connect, error_text(&error, url.as_str()));
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| parse_retry_after(value, SystemTime::now()));
        let (body, cut) = self.read_body(response, deadline).await;
        let took = started.elapsed();
        let text = snippet(&body);
        let detail = match (text.is_empty(), cut) {
            (true, None) => format!("HTTP {status}"),
            (false, None) => format!("HTTP {status}: {text}"),
            (_, Some(why)) => format!("HTTP {status} ({why}): {text}"),
        };
        Attempt {
            outcome: AttemptOutcome::Response {
                status,
                retry_after,
            },
            took,
            detail,
            body,
            traceparent: None,
        }
    }

    /// Reads at most the limit of the body by `deadline`; the rest is dropped with the
    /// connection. Says why it stopped early, if it did.
    async fn read_body(
        &self,
        response: hyper::Response<Incoming>,
        deadline: tokio::time::Instant,
    ) -> (Vec<u8>, Option<&'static str>) {
        let mut incoming = response.into_body();
        let mut body = Vec::new();
        while body.len() < self.max_response_bytes {
            match tokio::time::timeout_at(deadline, incoming.frame()).await {
                Ok(Some(Ok(frame))) => {
                    // Trailers, if any, are not the body.
                    if let Ok(data) = frame.into_data() {
                        body.extend_from_slice(&data);
                    }
                }
                Ok(None) => return (body, None),
                Ok(Some(Err(_))) => return (body, Some("body broken off")),
                Err(_) => return (body, Some("body timed out")),
            }
        }
        (body, None)
    }
}

/// The first characters of a response body, for error messages.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A send error as text for logs, the `hookline-last-error` header and the DLQ, with its
/// causes, and with the URL redacted should one of them name it (its query string may hold
/// a token).
fn error_text(error: &dyn std::error::Error, url: &str) -> String {
    let text = error_chain(error);
    if url.is_empty() {
        return text;
    }
    text.replace(url, &redact_url(url))
}

/// An error with its causes, which hyper-util keeps apart.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
