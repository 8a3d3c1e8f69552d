//! The user-facing endpoint config: the JSON value of a `webhook-endpoints` record.

mod signing;

pub use signing::MAX_SIGNING_KEYS;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::num::NonZeroU32;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::credentials::{self, ReceiverAuth};
use super::{Endpoint, EndpointError};
use crate::event::{MAX_HEADER_VALUE_LEN, MAX_HEADERS, MAX_ID_LEN};
use crate::http_field::{is_field_value, is_reserved, is_token};
use crate::policy::PolicyOverride;
use crate::secret::Secret;
use crate::subscription::{
    MAX_CHANNELS, MAX_EVENT_TYPES, Subscription, check_channel, check_pattern,
};
use crate::url_guard::{check_url, redact_url};

/// Most secrets an endpoint may have at once.
pub const MAX_SECRETS: usize = 10;
/// Longest per-attempt timeout, in milliseconds (5 minutes).
pub const MAX_TIMEOUT_MS: u64 = 300_000;
/// The smallest `rate_limit_per_s`: one delivery in 1000 s.
pub const MIN_RATE_PER_S: f64 = 0.001;

/// An endpoint as configured, e.g.
/// `{"url":"https://example.com/hook","secrets":["whsec_..."],"timeout_ms":10000,"retry":{"max_attempts":5}}`.
/// Unknown fields are refused. Its `Debug` shows no secret and no query string.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// Where deliveries are POSTed: an http or https URL without user info.
    pub url: String,
    /// Signing secrets `whsec_<base64>`; each signs every delivery (rotation). At most 10;
    /// an endpoint needs at least one secret or one signing key.
    pub secrets: Vec<String>,
    /// Ed25519 signing keys `whsk_<base64>` (`v1a`); each signs every delivery beside the
    /// secrets. At most 10. Default none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signing_keys: Vec<String>,
    /// Whether deliveries are made; deliveries to a disabled endpoint go to the DLQ. Default true.
    #[serde(default = "default_enabled")]
    pub enabled: bool,
    /// Why the endpoint was disabled (`gone: HTTP 410`, `failing: HTTP 500`, `manual: ...`),
    /// at most 256 bytes of printable text; set by the dispatcher or `hookline endpoints
    /// disable`, cleared by `hookline endpoints enable`. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// When the endpoint was disabled, in epoch milliseconds (at least 0). Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_at_ms: Option<i64>,
    /// Most deliveries in flight at once, at least 1. Default: the dispatcher's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// Most deliveries started per second, at least 0.001 (one in 1000 s). Default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit_per_s: Option<f64>,
    /// Per-attempt timeout in milliseconds, 1 to 300000. Default: the dispatcher's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Changes to the dispatcher's retry policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<PolicyOverride>,
    /// Deliver one at a time, in order (per partition). Default false.
    #[serde(default)]
    pub strict_ordering: bool,
    /// Extra HTTP request headers (not the ones the dispatcher sets). Default none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The tenant the endpoint belongs to: it then receives the tenant's events of the
    /// types (and channels) it subscribes to. Default none: direct deliveries only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Event types it subscribes to: exact names (`invoice.paid`), `prefix.*` or `*`, at
    /// most 64. Default empty: every type. Needs `tenant`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_types: Vec<String>,
    /// Channels it subscribes to, at most 10: it then receives only tenant events that
    /// carry one of them. Default empty: events whatever their channels. Needs `tenant`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
    /// Free text for people, at most 1024 bytes. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether an event's `endpoint_url` may replace `url`. Such a delivery is signed but
    /// carries none of `headers`. Default false: the event is parked (`blocked_url`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_url_override: bool,
    /// Signing secrets `whsec_<base64>` for deliveries to an event's own `endpoint_url`
    /// (with `allow_url_override`), used instead of `secrets` and `signing_keys`, which
    /// never sign them: whoever receives an override delivery cannot replay it to the
    /// endpoint's own URL. None: override deliveries are sent unsigned. At most 10, none of
    /// them one of `secrets`. Default none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub override_secrets: Vec<String>,
    /// PEM client certificate chain presented for mTLS (leaf first); needs `client_key`
    /// and an https `url`. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<String>,
    /// PEM private key of `client_certificate` (a secret: never shown). Default none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "credentials::expose_opt",
        deserialize_with = "credentials::stored_opt"
    )]
    pub client_key: Option<Secret>,
    /// A credential sent as `Authorization` to the endpoint's own URL. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<ReceiverAuth>,
    /// PEM CA certificates trusted for the receiver's certificate, besides the system
    /// roots (a receiver with a private CA); needs an https `url`. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_ca: Option<String>,
}

/// Longest `disabled_reason`, in bytes.
pub const MAX_DISABLED_REASON_LEN: usize = 256;

/// Longest endpoint `description`, in bytes.
pub const MAX_DESCRIPTION_LEN: usize = 1024;

fn default_enabled() -> bool {
    true
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> EndpointError {
    EndpointError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

impl EndpointConfig {
    /// A config with the given URL and secrets and every other field at its default.
    pub fn new(url: impl Into<String>, secrets: Vec<String>) -> Self {
        EndpointConfig {
            url: url.into(),
            secrets,
            signing_keys: Vec::new(),
            enabled: true,
            disabled_reason: None,
            disabled_at_ms: None,
            max_concurrency: None,
            rate_limit_per_s: None,
            timeout_ms: None,
            retry: None,
            strict_ordering: false,
            headers: BTreeMap::new(),
            tenant: None,
            event_types: Vec::new(),
            channels: Vec::new(),
            description: None,
            allow_url_override: false,
            override_secrets: Vec::new(),
            client_certificate: None,
            client_key: None,
            auth: None,
            server_ca: None,
        }
    }

    /// What the endpoint subscribes to, when it belongs to a tenant.
    pub fn subscription(&self) -> Option<Subscription> {
        self.tenant.as_ref().map(|tenant| Subscription {
            tenant: tenant.clone(),
            event_types: self.event_types.clone(),
            channels: self.channels.clone(),
        })
    }

    /// Parses and validates a record value.
    pub fn from_json(bytes: &[u8]) -> Result<Self, EndpointError> {
        let config: EndpointConfig = super::from_json_slice(bytes).map_err(EndpointError::Json)?;
        config.validate()?;
        Ok(config)
    }

    /// The record value.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an endpoint config always serializes")
    }

    /// Checks every field, naming the first one that is wrong.
    pub fn validate(&self) -> Result<(), EndpointError> {
        self.to_endpoint().map(|_| ())
    }

    /// Validates and converts into the run-time form.
    pub fn to_endpoint(&self) -> Result<Endpoint, EndpointError> {
        let target = check_url(&self.url).map_err(EndpointError::Url)?;
        let (secrets, signing_keys) = self.signing()?;
        let override_secrets = self.override_signing()?;
        let max_concurrency = self
            .max_concurrency
            .map(|n| {
                NonZeroU32::new(n).ok_or_else(|| invalid("max_concurrency", "must be at least 1"))
            })
            .transpose()?;
        // A rate so small that its period does not fit a duration used to mean no limit.
        if let Some(rate) = self.rate_limit_per_s
            && !(rate.is_finite() && rate >= MIN_RATE_PER_S)
        {
            return Err(invalid(
                "rate_limit_per_s",
                format!("must be a number of at least {MIN_RATE_PER_S}"),
            ));
        }
        if let Some(ms) = self.timeout_ms
            && !(1..=MAX_TIMEOUT_MS).contains(&ms)
        {
            return Err(invalid(
                "timeout_ms",
                format!("must be 1 to {MAX_TIMEOUT_MS}"),
            ));
        }
        if let Some(retry) = &self.retry {
            retry.validate("retry").map_err(EndpointError::Retry)?;
        }
        self.check_headers()?;
        self.check_disabled()?;
        self.check_subscription()?;
        credentials::check(self, target.scheme == crate::url_guard::Scheme::Https)?;
        Ok(Endpoint {
            target,
            secrets,
            signing_keys,
            enabled: self.enabled,
            max_concurrency,
            rate_limit_per_s: self.rate_limit_per_s,
            timeout: self.timeout_ms.map(Duration::from_millis),
            retry: self.retry.clone(),
            strict_ordering: self.strict_ordering,
            headers: self.headers.clone(),
            allow_url_override: self.allow_url_override,
            override_secrets,
        })
    }

    fn check_disabled(&self) -> Result<(), EndpointError> {
        if let Some(reason) = &self.disabled_reason
            && (reason.is_empty()
                || reason.len() > MAX_DISABLED_REASON_LEN
                || reason.chars().any(char::is_control))
        {
            return Err(invalid(
                "disabled_reason",
                format!("must be 1 to {MAX_DISABLED_REASON_LEN} bytes without control characters"),
            ));
        }
        if self.disabled_at_ms.is_some_and(|at| at < 0) {
            return Err(invalid("disabled_at_ms", "must be at least 0"));
        }
        Ok(())
    }

    fn check_subscription(&self) -> Result<(), EndpointError> {
        if let Some(description) = &self.description
            && description.len() > MAX_DESCRIPTION_LEN
        {
            return Err(invalid(
                "description",
                format!("must be at most {MAX_DESCRIPTION_LEN} bytes"),
            ));
        }
        let Some(tenant) = &self.tenant else {
            if !self.event_types.is_empty() {
                return Err(invalid("event_types", "needs a `tenant`"));
            }
            if !self.channels.is_empty() {
                return Err(invalid("channels", "needs a `tenant`"));
            }
            return Ok(());
        };
        if tenant.is_empty() || tenant.len() > MAX_ID_LEN || tenant.chars().any(char::is_control) {
            return Err(invalid(
                "tenant",
                format!("must be 1 to {MAX_ID_LEN} bytes without control characters"),
            ));
        }
        if self.event_types.len() > MAX_EVENT_TYPES {
            return Err(invalid(
                "event_types",
                format!("has more than {MAX_EVENT_TYPES} patterns"),
            ));
        }
        for (index, pattern) in self.event_types.iter().enumerate() {
            check_pattern(pattern)
                .map_err(|error| invalid(format!("event_types[{index}]"), error.to_string()))?;
        }
        if self.channels.len() > MAX_CHANNELS {
            return Err(invalid(
                "channels",
                format!("has more than {MAX_CHANNELS} channels"),
            ));
        }
        for (index, channel) in self.channels.iter().enumerate() {
            check_channel(channel)
                .map_err(|error| invalid(format!("channels[{index}]"), error.to_string()))?;
        }
        Ok(())
    }

    fn check_headers(&self) -> Result<(), EndpointError> {
        if self.headers.len() > MAX_HEADERS {
            return Err(invalid(
                "headers",
                format!("has more than {MAX_HEADERS} headers"),
            ));
        }
        let mut seen = BTreeSet::new();
        for (name, value) in &self.headers {
            let field = || format!("headers.{name}");
            if !is_token(name) {
                return Err(invalid(field(), "name is not a valid HTTP token"));
            }
            if is_reserved(name) {
                return Err(invalid(field(), "is set by the dispatcher"));
            }
            if !seen.insert(name.to_ascii_lowercase()) {
                return Err(invalid(
                    field(),
                    "is given twice (names are case-insensitive)",
                ));
            }
            if value.len() > MAX_HEADER_VALUE_LEN || !is_field_value(value) {
                return Err(invalid(
                    field(),
                    format!(
                        "value must be at most {MAX_HEADER_VALUE_LEN} bytes of tab, space or visible ASCII"
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl fmt::Debug for EndpointConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointConfig")
            .field("url", &redact_url(&self.url))
            .field(
                "secrets",
                &format_args!("<{} redacted>", self.secrets.len()),
            )
            .field(
                "signing_keys",
                &format_args!("<{} redacted>", self.signing_keys.len()),
            )
            .field("enabled", &self.enabled)
            .field("disabled_reason", &self.disabled_reason)
            .field("disabled_at_ms", &self.disabled_at_ms)
            .field("max_concurrency", &self.max_concurrency)
            .field("rate_limit_per_s", &self.rate_limit_per_s)
            .field("timeout_ms", &self.timeout_ms)
            .field("retry", &self.retry)
            .field("strict_ordering", &self.strict_ordering)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("tenant", &self.tenant)
            .field("event_types", &self.event_types)
            .field("channels", &self.channels)
            .field("description", &self.description)
            .field("allow_url_override", &self.allow_url_override)
            .field(
                "override_secrets",
                &format_args!("<{} redacted>", self.override_secrets.len()),
            )
            .field("client_certificate", &self.client_certificate.is_some())
            .field("client_key", &self.client_key)
            .field("auth", &self.auth)
            .field("server_ca", &self.server_ca.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod fuzz;
