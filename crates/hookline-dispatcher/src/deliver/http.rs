//! Sending one attempt over HTTP: no redirects, a timeout, a bounded response read, and
//! the guarded resolver; the answer becomes an [`AttemptOutcome`] for classification.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hookline_core::classify::{AttemptOutcome, parse_retry_after};
use hookline_core::url_guard::AddressPolicy;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use super::guard::GuardedResolver;
use super::request::OutboundRequest;

/// What one attempt gave.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// The outcome to classify.
    pub outcome: AttemptOutcome,
    /// How long it took.
    pub took: Duration,
    /// A short human-readable account (status and the start of the body, or the error).
    pub detail: String,
}

/// The HTTP client of a dispatcher.
#[derive(Clone, Debug)]
pub struct HttpSender {
    client: reqwest::Client,
    max_response_bytes: usize,
}

impl HttpSender {
    /// A client that never follows redirects and resolves through the address guard.
    pub fn new(
        policy: Arc<AddressPolicy>,
        user_agent: &str,
        max_response_bytes: usize,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(GuardedResolver::new(policy)))
            .user_agent(user_agent)
            .no_proxy()
            .pool_idle_timeout(Duration::from_secs(30))
            .build()?;
        Ok(HttpSender {
            client,
            max_response_bytes,
        })
    }

    /// Sends `request` with `timeout` for the whole exchange.
    pub async fn send(&self, request: &OutboundRequest, timeout: Duration) -> Attempt {
        let started = Instant::now();
        let result = tokio::time::timeout(timeout, self.exchange(request)).await;
        let took = started.elapsed();
        match result {
            Err(_) => Attempt {
                outcome: AttemptOutcome::Timeout,
                took,
                detail: format!("no answer within {} ms", timeout.as_millis()),
            },
            Ok(Ok((status, retry_after, snippet))) => Attempt {
                outcome: AttemptOutcome::Response {
                    status,
                    retry_after,
                },
                took,
                detail: if snippet.is_empty() {
                    format!("HTTP {status}")
                } else {
                    format!("HTTP {status}: {snippet}")
                },
            },
            Ok(Err(error)) if error.is_timeout() => Attempt {
                outcome: AttemptOutcome::Timeout,
                took,
                detail: error_chain(&error),
            },
            Ok(Err(error)) => Attempt {
                outcome: AttemptOutcome::Connect,
                took,
                detail: error_chain(&error),
            },
        }
    }

    async fn exchange(
        &self,
        request: &OutboundRequest,
    ) -> Result<(u16, Option<Duration>, String), reqwest::Error> {
        let mut headers = HeaderMap::with_capacity(request.headers.len());
        for (name, value) in &request.headers {
            // Names and values were validated when the event and endpoint were read; anything
            // still unrepresentable is left out rather than failing the delivery.
            if let (Ok(name), Ok(value)) = (
                HeaderName::try_from(name.as_str()),
                HeaderValue::try_from(value.as_str()),
            ) {
                headers.append(name, value);
            }
        }
        let mut response = self
            .client
            .post(&request.url)
            .headers(headers)
            .body(request.body.clone())
            .send()
            .await?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| parse_retry_after(value, SystemTime::now()));
        // Read at most the limit; the rest is dropped with the connection.
        let mut body = Vec::new();
        while body.len() < self.max_response_bytes {
            match response.chunk().await? {
                Some(chunk) => body.extend_from_slice(&chunk),
                None => break,
            }
        }
        Ok((status, retry_after, snippet(&body)))
    }
}

/// The first characters of a response body, for error messages.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An error with its causes, which reqwest keeps apart.
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
