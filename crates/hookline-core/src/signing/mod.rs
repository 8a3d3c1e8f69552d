//! Standard Webhooks signatures of `{webhook-id}.{webhook-timestamp}.{body}`: symmetric `v1`
//! (HMAC-SHA256 with a `whsec_` secret) and asymmetric `v1a` (Ed25519 with a `whsk_` signing
//! key, checked with its `whpk_` public key). One `webhook-signature` header carries every
//! signature of an endpoint, space-separated, so that secrets and keys can rotate.
//!
//! Verification runs before the sender is known, so its cost is bounded by the secrets and
//! keys, not by the header: at most [`MAX_SIGNATURE_CANDIDATES`] signatures of a version are
//! read, one HMAC is computed per secret and compared with each, and the Ed25519 message is
//! put together once per request.

mod asymmetric;
mod signer;
mod symmetric;

#[cfg(test)]
mod cost_tests;
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
/// The most signatures of one version (`v1` or `v1a`) a `webhook-signature` value may
/// carry. A value with more is refused with [`SigningError::TooManySignatures`] before any
/// of them is checked. A sender signs once per secret or key (hookline allows at most 10 of
/// each per endpoint), so this leaves room for a rotation while bounding what one
/// unauthenticated request can cost.
pub const MAX_SIGNATURE_CANDIDATES: usize = 16;

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
    /// The header carries more than [`MAX_SIGNATURE_CANDIDATES`] signatures of one version;
    /// none was checked.
    #[error("more than {max} `{version}` signatures in webhook-signature")]
    TooManySignatures {
        /// The version, `v1` or `v1a`.
        version: &'static str,
        /// The cap, [`MAX_SIGNATURE_CANDIDATES`].
        max: usize,
    },
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
    #[cfg(test)]
    work::count(|w| &mut w.messages);
    let timestamp = timestamp_s.to_string();
    let mut content = Vec::with_capacity(msg_id.len() + timestamp.len() + body.len() + 2);
    content.extend_from_slice(msg_id.as_bytes());
    content.push(b'.');
    content.extend_from_slice(timestamp.as_bytes());
    content.push(b'.');
    content.extend_from_slice(body);
    content
}

/// The `version` signatures in a `webhook-signature` value, each decoded to its `N` bytes,
/// found before any secret or key is used. Parts of other versions are skipped; so are parts
/// of this version whose base64 is not the length of `N` bytes (skipped undecoded) or does
/// not decode to exactly `N` bytes. Every part of this version counts towards
/// [`MAX_SIGNATURE_CANDIDATES`], well-formed or not, and the value is refused at the first
/// part past it.
fn candidates<const N: usize>(
    header: &str,
    version: &'static str,
) -> Result<Vec<[u8; N]>, SigningError> {
    use base64::Engine;
    let encoded_len = N.div_ceil(3) * 4;
    let mut found = Vec::new();
    let mut seen = 0usize;
    for (v, signature) in header
        .split_whitespace()
        .filter_map(|part| part.split_once(','))
    {
        if v != version {
            continue;
        }
        seen += 1;
        if seen > MAX_SIGNATURE_CANDIDATES {
            return Err(SigningError::TooManySignatures {
                version,
                max: MAX_SIGNATURE_CANDIDATES,
            });
        }
        if signature.len() != encoded_len {
            continue;
        }
        let mut bytes = [0u8; N];
        let decoded = base64::engine::general_purpose::STANDARD.decode_slice(signature, &mut bytes);
        if matches!(decoded, Ok(len) if len == N) {
            found.push(bytes);
        }
    }
    Ok(found)
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

/// Per-thread counts of the costly steps of verification, so that tests assert the work a
/// header causes instead of timing it.
#[cfg(test)]
pub(crate) mod work {
    use std::cell::Cell;

    /// The costly steps taken on this thread since the last [`take`].
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Work {
        /// HMAC-SHA256 computations over a whole message.
        pub hmacs: usize,
        /// Ed25519 verifications.
        pub ed25519: usize,
        /// Copies of a whole message into one buffer.
        pub messages: usize,
    }

    thread_local! {
        static WORK: Cell<Work> = const {
            Cell::new(Work { hmacs: 0, ed25519: 0, messages: 0 })
        };
    }

    /// Counts one step, the field `step` picks.
    pub fn count(step: fn(&mut Work) -> &mut usize) {
        WORK.with(|cell| {
            let mut work = cell.get();
            *step(&mut work) += 1;
            cell.set(work);
        });
    }

    /// The steps counted since the last call, resetting them.
    pub fn take() -> Work {
        WORK.with(|cell| cell.take())
    }
}
