//! The TLS material of an endpoint (client certificate and key for mTLS, a private CA for
//! the receiver) parsed and checked when its config is read, and the dispatcher's extra
//! roots (`http.ca_file`). Errors name the field, never a key.

use hookline_core::endpoint::EndpointConfig;
use openssl::pkey::{PKey, Private};
use openssl::x509::X509;

/// Why an endpoint's TLS material cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid `{field}`: {reason}")]
pub struct TlsError {
    /// The field: `client_certificate`, `client_key`, `server_ca` or `http.ca_file`.
    pub field: &'static str,
    /// What is wrong (never key material).
    pub reason: String,
}

fn tls_error(field: &'static str, reason: impl Into<String>) -> TlsError {
    TlsError {
        field,
        reason: reason.into(),
    }
}

/// An endpoint's parsed TLS material.
#[derive(Clone)]
pub struct EndpointTls {
    /// The client identity, when the endpoint has a client certificate.
    pub identity: Option<native_tls::Identity>,
    /// Extra roots for the receiver's certificate (`server_ca`).
    pub roots: Vec<native_tls::Certificate>,
}

impl std::fmt::Debug for EndpointTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointTls")
            .field("identity", &self.identity.as_ref().map(|_| "<redacted>"))
            .field("roots", &self.roots.len())
            .finish()
    }
}

/// Roots trusted besides the system's (`http.ca_file`); shown by their number.
#[derive(Clone, Default)]
pub struct Roots(pub Vec<native_tls::Certificate>);

impl std::fmt::Debug for Roots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Roots({})", self.0.len())
    }
}

/// Parses PEM certificates, at least one.
pub fn certificates(
    field: &'static str,
    pem: &[u8],
) -> Result<Vec<native_tls::Certificate>, TlsError> {
    let parsed = X509::stack_from_pem(pem)
        .map_err(|error| tls_error(field, format!("is not PEM certificates: {error}")))?;
    if parsed.is_empty() {
        return Err(tls_error(field, "holds no certificate"));
    }
    parsed
        .iter()
        .map(|cert| {
            let der = cert
                .to_der()
                .map_err(|error| tls_error(field, format!("cannot be encoded: {error}")))?;
            native_tls::Certificate::from_der(&der)
                .map_err(|error| tls_error(field, format!("is refused: {error}")))
        })
        .collect()
}

/// The endpoint's TLS material, `None` when it has none (it then shares the dispatcher's
/// client). A certificate that does not parse, a key that does not parse or does not
/// belong to the certificate is refused naming its field.
pub fn endpoint_tls(config: &EndpointConfig) -> Result<Option<EndpointTls>, TlsError> {
    let identity = match (&config.client_certificate, &config.client_key) {
        (Some(chain), Some(key)) => Some(identity(chain, key.expose())?),
        (None, None) => None,
        (Some(_), None) => {
            return Err(tls_error(
                "client_key",
                "is needed with `client_certificate`",
            ));
        }
        (None, Some(_)) => {
            return Err(tls_error(
                "client_certificate",
                "is needed with `client_key`",
            ));
        }
    };
    let roots = match &config.server_ca {
        Some(pem) => certificates("server_ca", pem.as_bytes())?,
        None => Vec::new(),
    };
    if identity.is_none() && roots.is_empty() {
        return Ok(None);
    }
    Ok(Some(EndpointTls { identity, roots }))
}

fn identity(chain: &str, key: &str) -> Result<native_tls::Identity, TlsError> {
    let certs = X509::stack_from_pem(chain.as_bytes()).map_err(|error| {
        tls_error(
            "client_certificate",
            format!("is not a PEM certificate chain: {error}"),
        )
    })?;
    let Some(leaf) = certs.first() else {
        return Err(tls_error("client_certificate", "holds no certificate"));
    };
    // The library's error text is left out: nothing of the key may reach a message.
    let key: PKey<Private> = PKey::private_key_from_pem(key.as_bytes()).map_err(|_| {
        tls_error(
            "client_key",
            "is not a PEM private key (PKCS#8, PKCS#1 or SEC1)",
        )
    })?;
    let matches = leaf
        .public_key()
        .map(|public| public.public_eq(&key))
        .unwrap_or(false);
    if !matches {
        return Err(tls_error(
            "client_key",
            "does not belong to the first certificate of `client_certificate`",
        ));
    }
    let pkcs8 = key
        .private_key_to_pem_pkcs8()
        .map_err(|_| tls_error("client_key", "cannot be converted to PKCS#8"))?;
    let mut chain_pem = Vec::new();
    for cert in &certs {
        let pem = cert.to_pem().map_err(|error| {
            tls_error("client_certificate", format!("cannot be encoded: {error}"))
        })?;
        chain_pem.extend_from_slice(&pem);
    }
    native_tls::Identity::from_pkcs8(&chain_pem, &pkcs8).map_err(|_| {
        tls_error(
            "client_key",
            "is refused by the TLS library with this certificate",
        )
    })
}

#[cfg(test)]
mod tests;
