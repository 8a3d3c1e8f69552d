//! Endpoints: the config records of the compacted `webhook-endpoints` topic, keyed by
//! endpoint id, and their validated run-time form.

mod config;
mod credentials;
mod shape;

use std::collections::BTreeMap;
use std::fmt;
use std::num::NonZeroU32;
use std::time::Duration;

use crate::policy::{PolicyError, PolicyOverride};
use crate::signing::{Signer, SigningError, SigningKey, SigningSecret};
use crate::url_guard::{ParsedTarget, UrlError, redact_url};

pub use config::{
    EndpointConfig, MAX_DESCRIPTION_LEN, MAX_DISABLED_REASON_LEN, MAX_SECRETS, MAX_SIGNING_KEYS,
    MAX_TIMEOUT_MS, MIN_RATE_PER_S,
};
pub use credentials::{MAX_CREDENTIAL_LEN, MAX_PEM_LEN, ReceiverAuth, secret_hint};
pub use shape::{ShapeError, from_json_slice, without_values};

/// An endpoint config that cannot be used, naming the field. Never shows a secret.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The record value is not JSON of the endpoint config shape. Names the field and
    /// what it expected, never the value (serde_json's own message quotes it).
    #[error("invalid endpoint config JSON: {0}")]
    Json(#[source] ShapeError),
    /// `url` is refused.
    #[error("invalid `url`: {0}")]
    Url(#[source] UrlError),
    /// A secret does not parse.
    #[error("invalid `secrets[{index}]`: {source}")]
    Secret {
        /// Its position in `secrets`.
        index: usize,
        /// What is wrong (never the secret itself).
        #[source]
        source: SigningError,
    },
    /// A signing key does not parse.
    #[error("invalid `signing_keys[{index}]`: {source}")]
    SigningKey {
        /// Its position in `signing_keys`.
        index: usize,
        /// What is wrong (never the key itself).
        #[source]
        source: SigningError,
    },
    /// The `retry` override is invalid.
    #[error("{0}")]
    Retry(#[source] PolicyError),
    /// Another field is out of range.
    #[error("invalid `{field}`: {reason}")]
    Invalid {
        /// The field, e.g. `timeout_ms` or `headers.X-Foo`.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

/// A validated endpoint, ready for delivery. Its `Debug` shows no secret and no query string.
#[derive(Clone)]
pub struct Endpoint {
    /// Where deliveries go.
    pub target: ParsedTarget,
    /// Signing secrets; each signs every delivery.
    pub secrets: Vec<SigningSecret>,
    /// Ed25519 signing keys (`v1a`); each signs every delivery beside the secrets.
    pub signing_keys: Vec<SigningKey>,
    /// Whether deliveries are made; a disabled endpoint's deliveries go to the DLQ.
    pub enabled: bool,
    /// Most deliveries in flight to this endpoint at once.
    pub max_concurrency: Option<NonZeroU32>,
    /// Most deliveries started per second.
    pub rate_limit_per_s: Option<f64>,
    /// Per-attempt timeout.
    pub timeout: Option<Duration>,
    /// Changes to the dispatcher's retry policy.
    pub retry: Option<PolicyOverride>,
    /// Deliver one at a time, in order (per partition).
    pub strict_ordering: bool,
    /// Extra HTTP request headers.
    pub headers: BTreeMap<String, String>,
    /// Whether an event's `endpoint_url` may replace `target`.
    pub allow_url_override: bool,
    /// What signs deliveries to an event's own URL instead of `secrets` and `signing_keys`
    /// (none: they are unsigned).
    pub override_secrets: Vec<SigningSecret>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &redact_url(self.target.url.as_str()))
            .field(
                "secrets",
                &format_args!("<{} redacted>", self.secrets.len()),
            )
            .field(
                "signing_keys",
                &self
                    .signing_keys
                    .iter()
                    .map(SigningKey::public_key)
                    .collect::<Vec<_>>(),
            )
            .field("enabled", &self.enabled)
            .field("max_concurrency", &self.max_concurrency)
            .field("rate_limit_per_s", &self.rate_limit_per_s)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .field("strict_ordering", &self.strict_ordering)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("allow_url_override", &self.allow_url_override)
            .field("override_secrets", &self.override_secrets.len())
            .finish()
    }
}

impl Endpoint {
    /// What its deliveries are signed with: every secret and every signing key.
    pub fn signer(&self) -> Signer {
        Signer::new(self.secrets.clone(), self.signing_keys.clone())
    }

    /// What deliveries to an event's own URL are signed with: the override secrets only
    /// (empty: unsigned).
    pub fn override_signer(&self) -> Signer {
        Signer::new(self.override_secrets.clone(), Vec::new())
    }
}
