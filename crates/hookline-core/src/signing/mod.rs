//! Standard Webhooks signatures of `{webhook-id}.{webhook-timestamp}.{body}`: symmetric `v1`
//! (HMAC-SHA256 with a `whsec_` secret) and asymmetric `v1a` (Ed25519 with a `whsk_` signing
//! key, checked with its `whpk_` public key). One `webhook-signature` header carries every
//! signature of an endpoint, space-separated, so that secrets and keys can rotate.

mod asymmetric;
mod signer;
mod symmetric;

#[cfg(test)]
mod tests;

use std::time::Duration;

pub use asymmetric::{PUBLIC_KEY_PREFIX, SIGNING_KEY_PREFIX, SigningKey, VerifyingKey, verify_v1a};
pub use signer::Signer;
pub use symmetric::{SigningSecret, sign, signature_headers, verify};

/// Header carrying the event id.
pub const WEBHOOK_ID: &str = "webhook-id";
/// Header carrying the signing time, epoch seconds.
pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";
/// Header carrying the signatures.
pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";
/// Prefix of a symmetric secret's text form.
pub const SECRET_PREFIX: &str = "whsec_";
/// Shortest secret key accepted, in bytes (the specification's lower bound).
pub const MIN_SECRET_LEN: usize = 24;
/// Longest secret key accepted, in bytes (the specification's upper bound).
pub const MAX_SECRET_LEN: usize = 64;
/// How far a receiver should accept `webhook-timestamp` from its clock.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(5 * 60);

/// A secret or key that cannot be used, or a signature that does not verify. Never holds
/// key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigningError {
    /// The secret does not start with `whsec_`.
    #[error("signing secret must start with `whsec_`")]
    MissingPrefix,
    /// The part after `whsec_` is not base64.
    #[error("signing secret is not valid base64 after `whsec_`")]
    Base64(#[source] base64::DecodeError),
    /// The key is too short or too long.
    #[error("signing secret key is {len} bytes; it must be {MIN_SECRET_LEN} to {MAX_SECRET_LEN}")]
    KeyLength {
        /// The key length in bytes.
        len: usize,
    },
    /// A signing key does not start with `whsk_`, or a public key with `whpk_`.
    #[error("{kind} must start with `{prefix}`")]
    KeyPrefix {
        /// `signing key` or `public key`.
        kind: &'static str,
        /// The prefix it needs.
        prefix: &'static str,
    },
    /// The part after the prefix is not base64.
    #[error("{kind} is not valid base64 after `{prefix}`")]
    KeyBase64 {
        /// `signing key` or `public key`.
        kind: &'static str,
        /// Its prefix.
        prefix: &'static str,
        /// What the decoder said.
        #[source]
        source: base64::DecodeError,
    },
    /// The decoded key has the wrong length.
    #[error("{kind} is {len} bytes after base64; it must be {expected}")]
    KeyBytes {
        /// `signing key` or `public key`.
        kind: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The length it must have.
        expected: usize,
    },
    /// The public half of a `whsk_` key is not the public key of its private half.
    #[error("signing key's public half does not belong to its private half")]
    KeyMismatch,
    /// A `whpk_` key is not an Ed25519 public key.
    #[error("public key is not a valid Ed25519 public key")]
    PublicKeyInvalid,
    /// No signature of the version checked matches any secret or key.
    #[error("no signature matches")]
    NoMatch,
    /// The timestamp is too far from the receiver's clock.
    #[error("webhook timestamp {timestamp_s} is too far from now ({now_s})")]
    Timestamp {
        /// The signed timestamp, epoch seconds.
        timestamp_s: i64,
        /// The receiver's clock, epoch seconds.
        now_s: i64,
    },
}

/// What is signed: `{msg_id}.{timestamp_s}.{body}`.
fn signed_content(msg_id: &str, timestamp_s: i64, body: &[u8]) -> Vec<u8> {
    let timestamp = timestamp_s.to_string();
    let mut content = Vec::with_capacity(msg_id.len() + timestamp.len() + body.len() + 2);
    content.extend_from_slice(msg_id.as_bytes());
    content.push(b'.');
    content.extend_from_slice(timestamp.as_bytes());
    content.push(b'.');
    content.extend_from_slice(body);
    content
}

/// The signatures of one version (`v1`, `v1a`) in a `webhook-signature` value, base64-decoded;
/// other versions and undecodable parts are skipped.
fn signatures_of<'a>(header: &'a str, version: &'a str) -> impl Iterator<Item = Vec<u8>> + 'a {
    use base64::Engine;
    header
        .split_whitespace()
        .filter_map(|part| part.split_once(','))
        .filter(move |(v, _)| *v == version)
        .filter_map(|(_, sig)| base64::engine::general_purpose::STANDARD.decode(sig).ok())
}

/// Whether a signed timestamp is within `tolerance` of the receiver's clock.
pub fn check_timestamp(
    timestamp_s: i64,
    now_s: i64,
    tolerance: Duration,
) -> Result<(), SigningError> {
    let skew = timestamp_s.abs_diff(now_s);
    if skew <= tolerance.as_secs() {
        Ok(())
    } else {
        Err(SigningError::Timestamp { timestamp_s, now_s })
    }
}
