//! What an endpoint proves to its receiver, and what it trusts of it: a client certificate
//! for mTLS (`client_certificate`, `client_key`), a credential sent as `Authorization`
//! (`auth`), and a private CA for the receiver's certificate (`server_ca`).
//!
//! Only shapes are checked here (pure); the dispatcher parses the PEM itself, and refuses a
//! config whose certificate or key does not parse or match. Keys, tokens and passwords are
//! [`Secret`]s: redacted in `Debug` and absent from every error. In the endpoints topic they
//! are stored in clear (like the signing secrets): `${env:..}` and `${file:..}` references
//! are resolved by `hookline endpoints put` on the operator's machine and refused in a
//! stored config, so that whoever can write the topic cannot make a dispatcher read its own
//! files or environment and send them out.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::EndpointError;
use super::config::EndpointConfig;
use crate::http_field::is_field_value;
use crate::secret::{Secret, is_reference};

/// Longest PEM text accepted in `client_certificate`, `client_key` or `server_ca`, in bytes.
pub const MAX_PEM_LEN: usize = 64 * 1024;
/// Longest bearer token, username or password, in bytes.
pub const MAX_CREDENTIAL_LEN: usize = 4096;

/// A credential for the receiver, sent as the `Authorization` header of every delivery to
/// the endpoint's own URL (never to an event's override URL), e.g.
/// `{"type":"bearer","token":"..."}` or `{"type":"basic","username":"u","password":"..."}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReceiverAuth {
    /// `Authorization: Bearer <token>`.
    Bearer {
        /// The token.
        #[serde(serialize_with = "expose", deserialize_with = "stored")]
        token: Secret,
    },
    /// `Authorization: Basic base64(<username>:<password>)`.
    Basic {
        /// The user name (no `:`).
        username: String,
        /// The password.
        #[serde(serialize_with = "expose", deserialize_with = "stored")]
        password: Secret,
    },
}

impl ReceiverAuth {
    /// The `Authorization` header value.
    pub fn header_value(&self) -> Secret {
        match self {
            ReceiverAuth::Bearer { token } => Secret::new(format!("Bearer {}", token.expose())),
            ReceiverAuth::Basic { username, password } => {
                let pair = format!("{username}:{}", password.expose());
                Secret::new(format!("Basic {}", STANDARD.encode(pair)))
            }
        }
    }

    /// `bearer` or `basic`.
    pub fn kind(&self) -> &'static str {
        match self {
            ReceiverAuth::Bearer { .. } => "bearer",
            ReceiverAuth::Basic { .. } => "basic",
        }
    }

    fn check(&self) -> Result<(), EndpointError> {
        let plain = |field: &str, value: &str| {
            if value.is_empty() || value.len() > MAX_CREDENTIAL_LEN || !is_field_value(value) {
                Err(invalid(
                    field,
                    format!(
                        "must be 1 to {MAX_CREDENTIAL_LEN} bytes of tab, space or visible ASCII"
                    ),
                ))
            } else {
                Ok(())
            }
        };
        match self {
            ReceiverAuth::Bearer { token } => {
                plain("auth.token", token.expose())?;
                if token.expose().trim() != token.expose() || token.expose().contains(' ') {
                    return Err(invalid("auth.token", "must not contain spaces"));
                }
                Ok(())
            }
            ReceiverAuth::Basic { username, password } => {
                plain("auth.username", username)?;
                if username.contains(':') {
                    return Err(invalid("auth.username", "must not contain `:`"));
                }
                plain("auth.password", password.expose())
            }
        }
    }
}

fn invalid(field: &str, reason: impl Into<String>) -> EndpointError {
    EndpointError::Invalid {
        field: field.to_owned(),
        reason: reason.into(),
    }
}

/// Writes a secret's value (into the endpoints topic, which holds the signing secrets too).
pub(crate) fn expose<S: Serializer>(secret: &Secret, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(secret.expose())
}

/// Writes an optional secret's value.
pub(crate) fn expose_opt<S: Serializer>(
    secret: &Option<Secret>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match secret {
        Some(secret) => serializer.serialize_some(secret.expose()),
        None => serializer.serialize_none(),
    }
}

/// Reads a stored secret: the value in clear, never a reference (see the module docs).
pub(crate) fn stored<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Secret, D::Error> {
    let text = String::deserialize(deserializer)?;
    if is_reference(&text) {
        return Err(serde::de::Error::custom(
            "a stored endpoint config holds secrets in clear: `${...}` references are resolved by `hookline endpoints put`",
        ));
    }
    Ok(Secret::new(text))
}

/// Reads an optional stored secret.
pub(crate) fn stored_opt<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Secret>, D::Error> {
    #[derive(Deserialize)]
    struct Stored(#[serde(deserialize_with = "stored")] Secret);
    Option::<Stored>::deserialize(deserializer).map(|stored| stored.map(|Stored(secret)| secret))
}

/// Whether `text` looks like PEM blocks of `label` (`CERTIFICATE`, `PRIVATE KEY`...).
fn pem_shaped(text: &str, label: &str) -> bool {
    text.len() <= MAX_PEM_LEN
        && text.contains("-----BEGIN ")
        && text.lines().any(|line| {
            line.starts_with("-----BEGIN ") && line.trim_end().ends_with(&format!("{label}-----"))
        })
}

/// Checks the credential fields of `config`, naming the first one that is wrong. Never
/// shows a key, token or password.
pub(crate) fn check(config: &EndpointConfig, https: bool) -> Result<(), EndpointError> {
    match (&config.client_certificate, &config.client_key) {
        (Some(_), None) => {
            return Err(invalid("client_key", "is needed with `client_certificate`"));
        }
        (None, Some(_)) => {
            return Err(invalid("client_certificate", "is needed with `client_key`"));
        }
        (Some(certificate), Some(key)) => {
            if !pem_shaped(certificate, "CERTIFICATE") {
                return Err(invalid(
                    "client_certificate",
                    format!(
                        "must be a PEM certificate chain (`-----BEGIN CERTIFICATE-----`), at most {MAX_PEM_LEN} bytes"
                    ),
                ));
            }
            if !pem_shaped(key.expose(), "PRIVATE KEY") {
                return Err(invalid(
                    "client_key",
                    format!(
                        "must be a PEM private key (`-----BEGIN PRIVATE KEY-----`), at most {MAX_PEM_LEN} bytes"
                    ),
                ));
            }
            if !https {
                return Err(invalid("client_certificate", "needs an https `url`"));
            }
        }
        (None, None) => {}
    }
    if let Some(ca) = &config.server_ca {
        if !pem_shaped(ca, "CERTIFICATE") {
            return Err(invalid(
                "server_ca",
                format!(
                    "must be PEM certificates (`-----BEGIN CERTIFICATE-----`), at most {MAX_PEM_LEN} bytes"
                ),
            ));
        }
        if !https {
            return Err(invalid("server_ca", "needs an https `url`"));
        }
    }
    if let Some(auth) = &config.auth {
        auth.check()?;
        if let Some(name) = config
            .headers
            .keys()
            .find(|name| name.eq_ignore_ascii_case("authorization"))
        {
            return Err(invalid(
                &format!("headers.{name}"),
                "conflicts with `auth`, which sets Authorization",
            ));
        }
    }
    Ok(())
}

/// `…` and the last four characters of a secret of at least 16; `…` alone for a shorter one.
pub fn secret_hint(secret: &Secret) -> String {
    let chars: Vec<char> = secret.expose().chars().collect();
    if chars.len() >= 16 {
        let tail: String = chars[chars.len() - 4..].iter().collect();
        format!("…{tail}")
    } else {
        "…".to_owned()
    }
}

#[cfg(test)]
mod tests;
