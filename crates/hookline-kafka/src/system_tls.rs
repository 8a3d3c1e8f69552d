//! One TLS connector trusting the system's roots, shared by every HTTP client of the
//! process that adds no trust of its own (the registry's reqwest client, the dispatcher's
//! delivery client). Building a connector parses the system's CA bundle twice (OpenSSL's
//! default paths, then native-tls's probe of the same file): about 35 ms of CPU each time,
//! which was most of a dispatcher's start-up CPU when each client built its own.

use std::sync::OnceLock;

static SYSTEM: OnceLock<Option<native_tls::TlsConnector>> = OnceLock::new();

/// The shared connector, built on first use; `None` when it cannot be built (the caller
/// then builds its own, which reports the error).
pub fn system_tls() -> Option<native_tls::TlsConnector> {
    // `TlsConnector::new` is `builder().build()`: what reqwest builds with its defaults
    // (verification of certificates and host names on, SNI on, the system's roots).
    SYSTEM
        .get_or_init(|| native_tls::TlsConnector::new().ok())
        .clone()
}

/// `builder` with the shared connector, built on first use. Where it cannot be built,
/// `builder` is returned as it is, so that reqwest builds its own and reports the error
/// when the client is built.
pub fn with_system_tls(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    match system_tls() {
        // reqwest takes it only as the `native_tls::TlsConnector` of the version it was
        // built with, and refuses to build the client otherwise (a test below).
        Some(connector) => builder.tls_backend_preconfigured(connector),
        None => builder,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reqwest_takes_the_shared_connector() {
        let client = with_system_tls(reqwest::Client::builder()).build();
        assert!(client.is_ok(), "{client:?}");
        assert!(
            SYSTEM.get().is_some_and(Option::is_some),
            "the connector was built and given"
        );
    }
}
