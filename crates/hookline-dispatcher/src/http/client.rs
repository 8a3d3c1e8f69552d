//! Sending one attempt over HTTP: no redirects, no proxy, a timeout, a bounded response
//! read, and the guarded resolver; the answer becomes an [`AttemptOutcome`] for
//! classification. Endpoints with TLS material of their own (a client certificate, a
//! private CA) get a client of their own, built by the same [`ClientFactory`].

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hookline_core::classify::{AttemptOutcome, parse_retry_after};
use hookline_core::secret::Secret;
use hookline_core::url_guard::{AddressPolicy, redact_url};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue, RETRY_AFTER};

use super::guard::{GuardError, GuardedResolver, PrecheckCache};
use super::request::OutboundRequest;
use super::tls::EndpointTls;

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

/// Builds every HTTP client of a dispatcher alike: no redirects, no retries of its own, no
/// proxy, the address guard's resolver, the User-Agent, and the extra roots of
/// `http.ca_file`.
#[derive(Clone, Debug)]
pub struct ClientFactory {
    policy: Arc<AddressPolicy>,
    user_agent: String,
    roots: Vec<reqwest::Certificate>,
}

impl ClientFactory {
    /// A factory for clients enforcing `policy` and trusting `roots` besides the system's.
    pub fn new(
        policy: Arc<AddressPolicy>,
        user_agent: &str,
        roots: Vec<reqwest::Certificate>,
    ) -> Self {
        ClientFactory {
            policy,
            user_agent: user_agent.to_owned(),
            roots,
        }
    }

    /// A client; with `tls`, one that presents its client certificate and trusts its CA.
    pub fn build(&self, tls: Option<&EndpointTls>) -> Result<reqwest::Client, reqwest::Error> {
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(GuardedResolver::new(Arc::clone(&self.policy))))
            .user_agent(self.user_agent.as_str())
            .no_proxy()
            // The dispatcher owns retries (each one an attempt, logged and counted). reqwest's
            // own layer retries only HTTP/2 and HTTP/3 refusals, which this build does not
            // speak, yet it copied every request in case: no copy.
            .retry(reqwest::retry::never().max_retries_per_request(0))
            .pool_idle_timeout(Duration::from_secs(30));
        if tls.is_none() && self.roots.is_empty() {
            // The system's roots only: the process's shared connector.
            return hookline_kafka::with_system_tls(builder).build();
        }
        let endpoint_roots = tls.map(|tls| tls.roots.iter()).into_iter().flatten();
        for root in self.roots.iter().chain(endpoint_roots) {
            builder = builder.add_root_certificate(root.clone());
        }
        if let Some(identity) = tls.and_then(|tls| tls.identity.clone()) {
            builder = builder.identity(identity);
        }
        builder.build()
    }
}

/// The HTTP client of a dispatcher.
#[derive(Clone, Debug)]
pub struct HttpSender {
    client: reqwest::Client,
    max_response_bytes: usize,
    /// The pre-check's verdicts, shared by every delivery.
    prechecks: Arc<PrecheckCache>,
}

impl HttpSender {
    /// The shared client, built by `factory` without endpoint TLS material.
    pub fn new(factory: &ClientFactory, max_response_bytes: usize) -> Result<Self, reqwest::Error> {
        Ok(HttpSender {
            client: factory.build(None)?,
            max_response_bytes,
            prechecks: Arc::new(PrecheckCache::new(Arc::clone(&factory.policy))),
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
        client: Option<&reqwest::Client>,
        request: OutboundRequest,
        timeout: Duration,
    ) -> Attempt {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        let client = client.unwrap_or(&self.client);
        let OutboundRequest {
            url,
            headers,
            body,
            authorization,
            ..
        } = request;
        let answered = tokio::time::timeout_at(
            deadline,
            post(client, url.clone(), headers, body, authorization.as_ref()),
        )
        .await;
        let response = match answered {
            Err(_) => {
                return Attempt {
                    outcome: AttemptOutcome::Timeout,
                    took: started.elapsed(),
                    detail: format!("no answer within {} ms", timeout.as_millis()),
                    body: Vec::new(),
                    traceparent: None,
                };
            }
            Ok(Err(error)) => {
                let outcome = if error.is_timeout() {
                    AttemptOutcome::Timeout
                } else {
                    AttemptOutcome::Connect
                };
                return Attempt {
                    outcome,
                    took: started.elapsed(),
                    detail: error_text(error, url.as_str()),
                    body: Vec::new(),
                    traceparent: None,
                };
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
        mut response: reqwest::Response,
        deadline: tokio::time::Instant,
    ) -> (Vec<u8>, Option<&'static str>) {
        let mut body = Vec::new();
        while body.len() < self.max_response_bytes {
            match tokio::time::timeout_at(deadline, response.chunk()).await {
                Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
                Ok(Ok(None)) => return (body, None),
                Ok(Err(_)) => return (body, Some("body broken off")),
                Err(_) => return (body, Some("body timed out")),
            }
        }
        (body, None)
    }
}

/// POSTs `body` to `url` with `headers`, which move into reqwest's request uncopied (as
/// does `url`, parsed already).
async fn post(
    client: &reqwest::Client,
    url: reqwest::Url,
    mut headers: HeaderMap,
    body: Vec<u8>,
    authorization: Option<&Secret>,
) -> Result<reqwest::Response, reqwest::Error> {
    if let Some(authorization) = authorization
        && let Ok(mut value) = HeaderValue::try_from(authorization.expose())
    {
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    let mut request = client.post(url).body(body).build()?;
    *request.headers_mut() = headers;
    client.execute(request).await
}

/// The first characters of a response body, for error messages.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A send error as text for logs, the `hookline-last-error` header and the DLQ: without
/// the URL reqwest puts in its message (its query string may hold a token), and with the
/// URL redacted should a cause repeat it.
fn error_text(error: reqwest::Error, url: &str) -> String {
    let text = error_chain(&error.without_url());
    if url.is_empty() {
        return text;
    }
    text.replace(url, &redact_url(url))
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
