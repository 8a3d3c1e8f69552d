//! A loopback HTTPS receiver for end-to-end tests that requires a client certificate
//! (mTLS), and the test PKI that issues its certificate and the clients': everything is
//! generated in the test with OpenSSL, nothing is checked in.
//!
//! It speaks just enough HTTP/1.1 for a webhook POST (one request per connection, answered
//! `200` with `Connection: close`) and records each request with the subject (CN) of the
//! client certificate it came with, and every handshake it refused.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use openssl::asn1::{Asn1Integer, Asn1Time};
use openssl::bn::BigNum;
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::ssl::{Ssl, SslAcceptor, SslMethod, SslVerifyMode};
use openssl::x509::extension::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName,
    SubjectKeyIdentifier,
};
use openssl::x509::{X509, X509Builder, X509NameBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_openssl::SslStream;
use tokio_util::sync::CancellationToken;

/// A certificate and its private key, both PEM.
#[derive(Clone)]
pub struct Issued {
    /// The certificate, PEM.
    pub certificate_pem: String,
    /// The private key, PEM (PKCS#8).
    pub key_pem: String,
}

/// A test certificate authority.
pub struct TestPki {
    ca: X509,
    ca_key: PKey<Private>,
}

fn new_key() -> PKey<Private> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).expect("P-256");
    PKey::from_ec_key(EcKey::generate(&group).expect("EC key")).expect("key")
}

fn serial() -> Asn1Integer {
    let mut serial = BigNum::new().expect("bignum");
    serial
        .rand(120, openssl::bn::MsbOption::MAYBE_ZERO, false)
        .expect("random serial");
    serial.to_asn1_integer().expect("serial")
}

fn builder(cn: &str, key: &PKey<Private>) -> X509Builder {
    let mut name = X509NameBuilder::new().expect("name");
    name.append_entry_by_nid(Nid::COMMONNAME, cn).expect("CN");
    let name = name.build();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64;
    let mut builder = X509Builder::new().expect("builder");
    builder.set_version(2).expect("v3");
    builder.set_serial_number(&serial()).expect("serial");
    builder.set_subject_name(&name).expect("subject");
    builder.set_pubkey(key).expect("public key");
    builder
        .set_not_before(&Asn1Time::from_unix(now - 3600).expect("time"))
        .expect("not before");
    builder
        .set_not_after(&Asn1Time::days_from_now(2).expect("time"))
        .expect("not after");
    builder
}

fn pem(cert: &X509, key: &PKey<Private>) -> Issued {
    Issued {
        certificate_pem: String::from_utf8(cert.to_pem().expect("PEM")).expect("ASCII"),
        key_pem: String::from_utf8(key.private_key_to_pem_pkcs8().expect("PEM")).expect("ASCII"),
    }
}

impl TestPki {
    /// A new CA named `cn`.
    pub fn new(cn: &str) -> TestPki {
        let ca_key = new_key();
        let mut builder = builder(cn, &ca_key);
        let name = builder_subject(cn);
        builder.set_issuer_name(&name).expect("issuer");
        builder
            .append_extension(BasicConstraints::new().critical().ca().build().expect("bc"))
            .expect("bc");
        builder
            .append_extension(
                KeyUsage::new()
                    .critical()
                    .key_cert_sign()
                    .crl_sign()
                    .build()
                    .expect("ku"),
            )
            .expect("ku");
        let ski = SubjectKeyIdentifier::new()
            .build(&builder.x509v3_context(None, None))
            .expect("ski");
        builder.append_extension(ski).expect("ski");
        builder
            .sign(&ca_key, MessageDigest::sha256())
            .expect("sign");
        TestPki {
            ca: builder.build(),
            ca_key,
        }
    }

    /// The CA certificate, PEM (what a `server_ca` or `http.ca_file` holds).
    pub fn ca_pem(&self) -> String {
        String::from_utf8(self.ca.to_pem().expect("PEM")).expect("ASCII")
    }

    /// A client certificate with subject CN `cn`, for mTLS.
    pub fn client(&self, cn: &str) -> Issued {
        self.issue(cn, false)
    }

    /// A server certificate for 127.0.0.1 and localhost.
    pub fn server(&self) -> Issued {
        self.issue("localhost", true)
    }

    fn issue(&self, cn: &str, server: bool) -> Issued {
        let key = new_key();
        let mut builder = builder(cn, &key);
        builder
            .set_issuer_name(self.ca.subject_name())
            .expect("issuer");
        builder
            .append_extension(BasicConstraints::new().build().expect("bc"))
            .expect("bc");
        builder
            .append_extension(
                KeyUsage::new()
                    .critical()
                    .digital_signature()
                    .key_agreement()
                    .build()
                    .expect("ku"),
            )
            .expect("ku");
        let eku = if server {
            ExtendedKeyUsage::new().server_auth().build()
        } else {
            ExtendedKeyUsage::new().client_auth().build()
        };
        builder.append_extension(eku.expect("eku")).expect("eku");
        let context = builder.x509v3_context(Some(&self.ca), None);
        let aki = AuthorityKeyIdentifier::new()
            .keyid(false)
            .build(&context)
            .expect("aki");
        let san = if server {
            Some(
                SubjectAlternativeName::new()
                    .ip("127.0.0.1")
                    .dns("localhost")
                    .build(&context)
                    .expect("san"),
            )
        } else {
            None
        };
        builder.append_extension(aki).expect("aki");
        if let Some(san) = san {
            builder.append_extension(san).expect("san");
        }
        builder
            .sign(&self.ca_key, MessageDigest::sha256())
            .expect("sign");
        pem(&builder.build(), &key)
    }
}

fn builder_subject(cn: &str) -> openssl::x509::X509Name {
    let mut name = X509NameBuilder::new().expect("name");
    name.append_entry_by_nid(Nid::COMMONNAME, cn).expect("CN");
    name.build()
}

/// One request the TLS receiver got.
#[derive(Clone, Debug)]
pub struct TlsReceived {
    /// The request line's path.
    pub path: String,
    /// Header names (lower case) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// The CN of the client certificate, when one was presented.
    pub client_subject: Option<String>,
}

impl TlsReceived {
    /// A header's value (name compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Log {
    received: Vec<TlsReceived>,
    refused_handshakes: usize,
}

/// The HTTPS receiver. Dropping it stops the server.
pub struct TlsReceiver {
    addr: SocketAddr,
    log: Arc<Mutex<Log>>,
    stop: CancellationToken,
}

impl Drop for TlsReceiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn lock(log: &Mutex<Log>) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl TlsReceiver {
    /// Starts a receiver on a free loopback port with a server certificate of `pki`;
    /// with `require_client_certificate`, a handshake without a client certificate issued
    /// by `pki` is refused.
    pub async fn start(pki: &TestPki, require_client_certificate: bool) -> TlsReceiver {
        let server = pki.server();
        let mut acceptor =
            SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).expect("acceptor");
        let cert = X509::from_pem(server.certificate_pem.as_bytes()).expect("cert");
        let key = PKey::private_key_from_pem(server.key_pem.as_bytes()).expect("key");
        acceptor.set_certificate(&cert).expect("cert");
        acceptor.set_private_key(&key).expect("key");
        acceptor
            .cert_store_mut()
            .add_cert(pki.ca.clone())
            .expect("trust the CA");
        acceptor.add_client_ca(&pki.ca).expect("client CA list");
        if require_client_certificate {
            acceptor.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
        } else {
            acceptor.set_verify(SslVerifyMode::NONE);
        }
        let acceptor = Arc::new(acceptor.build());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("bound address");
        let log = Arc::new(Mutex::new(Log::default()));
        let stop = CancellationToken::new();
        let (until, shared) = (stop.clone(), Arc::clone(&log));
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = until.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((tcp, _)) = accepted else { continue };
                let (acceptor, log) = (Arc::clone(&acceptor), Arc::clone(&shared));
                tokio::spawn(async move {
                    let Ok(ssl) = Ssl::new(acceptor.context()) else {
                        return;
                    };
                    let Ok(mut stream) = SslStream::new(ssl, tcp) else {
                        return;
                    };
                    if Pin::new(&mut stream).accept().await.is_err() {
                        lock(&log).refused_handshakes += 1;
                        return;
                    }
                    let client_subject =
                        stream
                            .ssl()
                            .peer_certificate()
                            .and_then(|cert| -> Option<String> {
                                cert.subject_name()
                                    .entries_by_nid(Nid::COMMONNAME)
                                    .next()
                                    .and_then(|entry| entry.data().to_string().ok())
                            });
                    if let Some(mut request) = read_request(&mut stream).await {
                        request.client_subject = client_subject;
                        lock(&log).received.push(request);
                        let _ = stream
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                            .await;
                        let _ = stream.shutdown().await;
                    }
                });
            }
        });
        TlsReceiver { addr, log, stop }
    }

    /// The URL of `/hooks/<name>`.
    pub fn url(&self, name: &str) -> String {
        format!("https://{}/hooks/{name}", self.addr)
    }

    /// Every request received so far, in arrival order.
    pub fn received(&self) -> Vec<TlsReceived> {
        lock(&self.log).received.clone()
    }

    /// How many handshakes were refused (no or an unknown client certificate).
    pub fn refused_handshakes(&self) -> usize {
        lock(&self.log).refused_handshakes
    }
}

/// Reads one HTTP/1.1 request with a `content-length` body; `None` if it is not one.
async fn read_request<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> Option<TlsReceived> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buf.len() > 1 << 20 {
            return None;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Some(TlsReceived {
        path,
        headers,
        body,
        client_subject: None,
    })
}
