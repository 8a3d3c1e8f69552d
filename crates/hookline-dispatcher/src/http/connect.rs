//! The delivery clients: hyper-util's pooled HTTP/1 client over native TLS, each built
//! alike by a [`ClientFactory`]: no redirects (a 3xx is an answer), no retries of its own,
//! no proxy, the address guard's resolver, the User-Agent, and the extra roots of
//! `http.ca_file`. reqwest is the same stack with layers on top that each request paid for
//! and a delivery does not use: its redirect layer parsed every request's URL and every
//! response's URL again, and it copied the request's headers once more.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hookline_core::url_guard::AddressPolicy;
use http_body_util::Full;
use hyper::header::{ACCEPT, HeaderMap, HeaderValue, USER_AGENT};
use hyper::{Method, Request, Response, Uri};
use hyper_tls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::guard::GuardedResolver;
use super::tls::{EndpointTls, Roots};
use crate::error::ClientError;

/// How long an idle pooled connection is kept.
const POOL_IDLE: Duration = Duration::from_secs(30);

/// TCP keepalive on every connection: probes after 15 s idle, every 15 s, 3 of them
/// (reqwest's defaults, which the dispatcher had before).
const KEEPALIVE: Duration = Duration::from_secs(15);
const KEEPALIVE_RETRIES: u32 = 3;

type Connector = HttpsConnector<HttpConnector<GuardedResolver>>;

/// One delivery client: a pool of connections and how they are made. Cheap to clone (the
/// clones share the pool).
#[derive(Clone)]
pub struct DeliveryClient {
    client: Client<Connector, Full<Bytes>>,
    user_agent: HeaderValue,
}

impl std::fmt::Debug for DeliveryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveryClient")
            .field("user_agent", &self.user_agent)
            .finish_non_exhaustive()
    }
}

/// The error of one exchange (connect, write, read of the head).
pub type SendError = hyper_util::client::legacy::Error;

impl DeliveryClient {
    /// POSTs `body` to `uri` with `headers` (which move into the request uncopied), adding
    /// the User-Agent and `accept: */*` unless they are there already.
    pub async fn post(
        &self,
        uri: Uri,
        mut headers: HeaderMap,
        body: Vec<u8>,
    ) -> Result<Response<hyper::body::Incoming>, SendError> {
        if !headers.contains_key(USER_AGENT) {
            headers.insert(USER_AGENT, self.user_agent.clone());
        }
        if !headers.contains_key(ACCEPT) {
            headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
        }
        let mut request = Request::new(Full::new(Bytes::from(body)));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = uri;
        *request.headers_mut() = headers;
        self.client.request(request).await
    }
}

/// Builds every delivery client of a dispatcher alike.
#[derive(Clone, Debug)]
pub struct ClientFactory {
    policy: Arc<AddressPolicy>,
    user_agent: HeaderValue,
    roots: Roots,
}

impl ClientFactory {
    /// A factory for clients enforcing `policy` and trusting `roots` besides the system's.
    pub fn new(policy: Arc<AddressPolicy>, user_agent: HeaderValue, roots: Roots) -> Self {
        ClientFactory {
            policy,
            user_agent,
            roots,
        }
    }

    /// The address policy the clients enforce.
    pub(super) fn policy(&self) -> &Arc<AddressPolicy> {
        &self.policy
    }

    /// A client; with `tls`, one that presents its client certificate and trusts its CA.
    pub fn build(&self, tls: Option<&EndpointTls>) -> Result<DeliveryClient, ClientError> {
        let system = (tls.is_none() && self.roots.0.is_empty())
            .then(hookline_kafka::system_tls)
            .flatten();
        let tls = match system {
            // The system's roots only: the process's shared connector.
            Some(shared) => shared,
            None => {
                let mut builder = native_tls::TlsConnector::builder();
                let endpoint_roots = tls.map(|tls| tls.roots.iter()).into_iter().flatten();
                for root in self.roots.0.iter().chain(endpoint_roots) {
                    builder.add_root_certificate(root.clone());
                }
                if let Some(identity) = tls.and_then(|tls| tls.identity.clone()) {
                    builder.identity(identity);
                }
                builder.build()?
            }
        };
        let mut http =
            HttpConnector::new_with_resolver(GuardedResolver::new(Arc::clone(&self.policy)));
        // https URLs are the TLS layer's to take.
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_keepalive(Some(KEEPALIVE));
        http.set_keepalive_interval(Some(KEEPALIVE));
        http.set_keepalive_retries(Some(KEEPALIVE_RETRIES));
        let connector = HttpsConnector::from((http, tokio_native_tls::TlsConnector::from(tls)));
        let client = Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE)
            .build(connector);
        Ok(DeliveryClient {
            client,
            user_agent: self.user_agent.clone(),
        })
    }
}
