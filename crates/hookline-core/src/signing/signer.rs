//! Everything an endpoint signs with: its `whsec_` secrets (`v1`) and its `whsk_` keys
//! (`v1a`), all in one `webhook-signature` value.

use std::fmt;

use super::{SigningKey, SigningSecret};

/// An endpoint's secrets and signing keys. Its `Debug` shows the number of secrets and the
/// public keys, nothing secret.
#[derive(Clone, Default)]
pub struct Signer {
    secrets: Vec<SigningSecret>,
    keys: Vec<SigningKey>,
}

impl Signer {
    /// A signer with these secrets and keys (either may be empty).
    pub fn new(secrets: Vec<SigningSecret>, keys: Vec<SigningKey>) -> Self {
        Signer { secrets, keys }
    }

    /// Whether it has neither a secret nor a key (the request goes unsigned).
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty() && self.keys.is_empty()
    }

    /// The symmetric secrets.
    pub fn secrets(&self) -> &[SigningSecret] {
        &self.secrets
    }

    /// The signing keys.
    pub fn keys(&self) -> &[SigningKey] {
        &self.keys
    }

    /// The `webhook-signature` value: each secret's `v1,<sig>` then each key's `v1a,<sig>`,
    /// space-separated (empty when it has neither).
    pub fn sign(&self, msg_id: &str, timestamp_s: i64, body: &[u8]) -> String {
        let v1 = self
            .secrets
            .iter()
            .map(|s| s.sign(msg_id, timestamp_s, body));
        let v1a = self.keys.iter().map(|k| k.sign(msg_id, timestamp_s, body));
        v1.chain(v1a).collect::<Vec<_>>().join(" ")
    }
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field(
                "secrets",
                &format_args!("<{} redacted>", self.secrets.len()),
            )
            .field(
                "keys",
                &self
                    .keys
                    .iter()
                    .map(SigningKey::public_key)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}
