//! An authenticating TLS proxy in front of the real registry: it listens on 127.0.0.1:0 with
//! a certificate from a CA generated per proxy (with `rcgen`), answers 401 to requests
//! without the expected `Authorization` header, forwards the others to the registry, and
//! counts both.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_native_tls::{TlsAcceptor, TlsStream};
use tokio_util::sync::CancellationToken;

/// What the proxy lets through.
#[derive(Clone, Debug)]
pub enum Credentials {
    /// `Authorization: Basic base64(user:password)`.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: String,
    },
    /// `Authorization: Bearer <token>`.
    Bearer(String),
}

impl Credentials {
    fn header(&self) -> String {
        match self {
            Credentials::Basic { username, password } => {
                format!(
                    "Basic {}",
                    base64_encode(format!("{username}:{password}").as_bytes())
                )
            }
            Credentials::Bearer(token) => format!("Bearer {token}"),
        }
    }
}

struct Shared {
    expected: String,
    upstream: String,
    http: reqwest::Client,
    authorized: AtomicUsize,
    refused: AtomicUsize,
}

/// The proxy. Dropping it stops it and removes its CA file.
pub struct AuthProxy {
    url: String,
    ca_file: tempfile::NamedTempFile,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Drop for AuthProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl AuthProxy {
    /// A proxy in front of the registry at `upstream` (the Confluent-compatible API's base
    /// URL, e.g. `HOOKLINE_TEST_REGISTRY`) that lets `credentials` through.
    pub async fn start(upstream: &str, credentials: Credentials) -> AuthProxy {
        let (acceptor, ca_pem) = tls_acceptor();
        let ca_file = tempfile::Builder::new()
            .prefix("hookline-test-ca-")
            .suffix(".pem")
            .tempfile()
            .expect("a CA file");
        std::fs::write(ca_file.path(), ca_pem).expect("write the CA file");
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("bound address");
        let shared = Arc::new(Shared {
            expected: credentials.header(),
            upstream: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("an HTTP client"),
            authorized: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
        });
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(Arc::clone(&shared));
        let stop = CancellationToken::new();
        let until = stop.clone();
        let listener = TlsListener::start(listener, acceptor, stop.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(until.cancelled_owned())
                .await;
        });
        AuthProxy {
            // The path of the registry's API is kept: only scheme, host and port change.
            url: format!("https://{addr}{}", path_of(upstream)),
            ca_file,
            shared,
            stop,
        }
    }

    /// The registry's base URL through the proxy (`https://127.0.0.1:<port>/...`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A PEM file with the CA that signed the proxy's certificate.
    pub fn ca_file(&self) -> &Path {
        self.ca_file.path()
    }

    /// Requests with the expected credentials (forwarded).
    pub fn authorized(&self) -> usize {
        self.shared.authorized.load(Ordering::SeqCst)
    }

    /// Requests without them (answered 401).
    pub fn refused(&self) -> usize {
        self.shared.refused.load(Ordering::SeqCst)
    }
}

/// The path part of an `http://host:port/path` URL, without a final `/`.
fn path_of(url: &str) -> &str {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    rest.find('/')
        .map_or("", |at| &rest[at..])
        .trim_end_matches('/')
}

async fn forward(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let authorized = request
        .headers()
        .get(header::AUTHORIZATION)
        .is_some_and(|value| value.as_bytes() == shared.expected.as_bytes());
    if !authorized {
        shared.refused.fetch_add(1, Ordering::SeqCst);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"registry\""),
        );
        let body = r#"{"error_code":401,"message":"Unauthorized"}"#;
        return (StatusCode::UNAUTHORIZED, headers, body).into_response();
    }
    shared.authorized.fetch_add(1, Ordering::SeqCst);
    let (parts, body) = request.into_parts();
    // The proxy's URL keeps the registry's path, so the request's path is the upstream's.
    let upstream_root = shared
        .upstream
        .strip_suffix(path_of(&shared.upstream))
        .unwrap_or(&shared.upstream);
    let target = format!(
        "{upstream_root}{}",
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let Ok(body) = axum::body::to_bytes(body, 16 * 1024 * 1024).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let mut outbound = shared.http.request(parts.method, target).body(body);
    if let Some(kind) = parts.headers.get(header::CONTENT_TYPE) {
        outbound = outbound.header(header::CONTENT_TYPE, kind);
    }
    if let Some(accept) = parts.headers.get(header::ACCEPT) {
        outbound = outbound.header(header::ACCEPT, accept);
    }
    let Ok(answer) = outbound.send().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let status = answer.status();
    let kind = answer.headers().get(header::CONTENT_TYPE).cloned();
    let bytes = answer.bytes().await.unwrap_or_else(|_| Bytes::new());
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    if let Some(kind) = kind {
        response.headers_mut().insert(header::CONTENT_TYPE, kind);
    }
    response
}

/// A fresh CA, and a TLS acceptor with a certificate for 127.0.0.1 and `localhost` it signed.
fn tls_acceptor() -> (TlsAcceptor, String) {
    let mut ca_params = CertificateParams::new(Vec::new()).expect("CA params");
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "hookline test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key"))
        .expect("CA certificate");
    let server_key = KeyPair::generate().expect("server key");
    let mut server_params =
        CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("server params");
    server_params
        .distinguished_name
        .push(DnType::CommonName, "127.0.0.1");
    let server = server_params
        .signed_by(&server_key, &ca)
        .expect("server certificate");
    let identity = tokio_native_tls::native_tls::Identity::from_pkcs8(
        server.pem().as_bytes(),
        server_key.serialize_pem().as_bytes(),
    )
    .expect("a TLS identity");
    let acceptor =
        tokio_native_tls::native_tls::TlsAcceptor::new(identity).expect("a TLS acceptor");
    (TlsAcceptor::from(acceptor), ca.pem())
}

/// TCP connections on the listener, after their TLS handshake. Handshakes run in tasks of
/// their own, so that a slow one holds no other connection up; failed ones (a client that
/// does not trust the CA) are dropped.
struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
}

impl TlsListener {
    fn start(listener: TcpListener, acceptor: TlsAcceptor, stop: CancellationToken) -> Self {
        let addr = listener.local_addr().expect("bound address");
        let (send, ready) = mpsc::channel(64);
        let acceptor = Arc::new(acceptor);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((stream, peer)) = accepted else {
                    continue;
                };
                let (acceptor, send) = (Arc::clone(&acceptor), send.clone());
                tokio::spawn(async move {
                    let handshake = tokio::time::timeout(HANDSHAKE, acceptor.accept(stream));
                    if let Ok(Ok(tls)) = handshake.await {
                        let _ = send.send((tls, peer)).await;
                    }
                });
            }
        });
        TlsListener { ready, addr }
    }
}

const HANDSHAKE: Duration = Duration::from_secs(10);

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(ready) => ready,
            // The accepting task stopped with the proxy: no more connections.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
