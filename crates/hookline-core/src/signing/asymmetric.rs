//! Asymmetric `v1a` signatures: `v1a,<base64 Ed25519 signature>` made with a `whsk_` signing
//! key and checked with its `whpk_` public key, which can be handed to anyone.
//!
//! The text forms are Svix's: `whsk_` + base64 of the 32-byte seed followed by the 32-byte
//! public key (64 bytes), `whpk_` + base64 of the 32-byte public key.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{KEYPAIR_LENGTH, PUBLIC_KEY_LENGTH, SIGNATURE_LENGTH};
use ed25519_dalek::{SECRET_KEY_LENGTH, Signature, Signer as _};
use rand::Rng;

use super::{SigningError, candidates, signed_content};

/// Prefix of a signing key's text form.
pub const SIGNING_KEY_PREFIX: &str = "whsk_";
/// Prefix of a public key's text form.
pub const PUBLIC_KEY_PREFIX: &str = "whpk_";

const SIGNING_KEY: &str = "signing key";
const PUBLIC_KEY: &str = "public key";

/// An Ed25519 signing key, written `whsk_<base64>`. Its `Debug` shows only the public key.
#[derive(Clone)]
pub struct SigningKey(ed25519_dalek::SigningKey);

/// An Ed25519 public key, written `whpk_<base64>`: what a receiver verifies `v1a`
/// signatures with. It is not secret.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct VerifyingKey(ed25519_dalek::VerifyingKey);

/// The bytes after `prefix` in `text`, which must be `expected` long.
fn decode(
    text: &str,
    kind: &'static str,
    prefix: &'static str,
    expected: usize,
) -> Result<Vec<u8>, SigningError> {
    let b64 = text
        .strip_prefix(prefix)
        .ok_or(SigningError::KeyPrefix { kind, prefix })?;
    let bytes = BASE64
        .decode(b64)
        .map_err(|source| SigningError::KeyBase64 {
            kind,
            prefix,
            source,
        })?;
    if bytes.len() == expected {
        Ok(bytes)
    } else {
        Err(SigningError::KeyBytes {
            kind,
            len: bytes.len(),
            expected,
        })
    }
}

impl SigningKey {
    /// Parses `whsk_<base64 of seed and public key>`, checking that the two belong together.
    pub fn parse(text: &str) -> Result<Self, SigningError> {
        let bytes = decode(text, SIGNING_KEY, SIGNING_KEY_PREFIX, KEYPAIR_LENGTH)?;
        let (seed, public) = bytes.split_at(SECRET_KEY_LENGTH);
        let seed: [u8; SECRET_KEY_LENGTH] =
            seed.try_into().map_err(|_| SigningError::KeyBytes {
                kind: SIGNING_KEY,
                len: bytes.len(),
                expected: KEYPAIR_LENGTH,
            })?;
        let key = ed25519_dalek::SigningKey::from_bytes(&seed);
        if key.verifying_key().as_bytes()[..] == *public {
            Ok(SigningKey(key))
        } else {
            Err(SigningError::KeyMismatch)
        }
    }

    /// A new random key.
    pub fn generate(rng: &mut impl Rng) -> Self {
        let mut seed = [0u8; SECRET_KEY_LENGTH];
        rng.fill(&mut seed);
        SigningKey(ed25519_dalek::SigningKey::from_bytes(&seed))
    }

    /// The `whsk_<base64>` text form, to store in the endpoint config; this exposes the key.
    pub fn to_whsk(&self) -> String {
        let mut bytes = Vec::with_capacity(KEYPAIR_LENGTH);
        bytes.extend_from_slice(self.0.as_bytes());
        bytes.extend_from_slice(self.0.verifying_key().as_bytes());
        format!("{SIGNING_KEY_PREFIX}{}", BASE64.encode(bytes))
    }

    /// Its public key, to hand to the receiver.
    pub fn public_key(&self) -> VerifyingKey {
        VerifyingKey(self.0.verifying_key())
    }

    /// This key's signature: `v1a,<base64 Ed25519 signature of "{msg_id}.{timestamp_s}.{body}">`.
    pub fn sign(&self, msg_id: &str, timestamp_s: i64, body: &[u8]) -> String {
        let signature = self.0.sign(&signed_content(msg_id, timestamp_s, body));
        format!("v1a,{}", BASE64.encode(signature.to_bytes()))
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey(<redacted>, {})", self.public_key())
    }
}

impl FromStr for SigningKey {
    type Err = SigningError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl VerifyingKey {
    /// Parses `whpk_<base64 of the 32-byte public key>`.
    pub fn parse(text: &str) -> Result<Self, SigningError> {
        let bytes = decode(text, PUBLIC_KEY, PUBLIC_KEY_PREFIX, PUBLIC_KEY_LENGTH)?;
        let bytes: [u8; PUBLIC_KEY_LENGTH] =
            bytes
                .as_slice()
                .try_into()
                .map_err(|_| SigningError::KeyBytes {
                    kind: PUBLIC_KEY,
                    len: bytes.len(),
                    expected: PUBLIC_KEY_LENGTH,
                })?;
        ed25519_dalek::VerifyingKey::from_bytes(&bytes)
            .map(VerifyingKey)
            .map_err(|_| SigningError::PublicKeyInvalid)
    }

    /// The `whpk_<base64>` text form.
    pub fn to_whpk(&self) -> String {
        format!("{PUBLIC_KEY_PREFIX}{}", BASE64.encode(self.0.as_bytes()))
    }

    fn verifies(&self, content: &[u8], signature: &Signature) -> bool {
        #[cfg(test)]
        super::work::count(|w| &mut w.ed25519);
        self.0.verify_strict(content, signature).is_ok()
    }
}

impl fmt::Display for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_whpk())
    }
}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VerifyingKey({self})")
    }
}

impl FromStr for VerifyingKey {
    type Err = SigningError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Checks a `webhook-signature` value as a receiver holding public keys would: `Ok` when any
/// `v1a` signature in it verifies (strictly) with any key. Other versions are ignored, and
/// so are `v1a` signatures that are not 64 bytes. The signed message is put together once,
/// and only when there is a key and a signature to check it with. A value with more than
/// [`MAX_SIGNATURE_CANDIDATES`](super::MAX_SIGNATURE_CANDIDATES) `v1a` signatures is
/// refused with [`SigningError::TooManySignatures`] before any check. Check the timestamp
/// separately with [`check_timestamp`](super::check_timestamp).
pub fn verify_v1a(
    keys: &[VerifyingKey],
    msg_id: &str,
    timestamp_s: i64,
    body: &[u8],
    signature_header: &str,
) -> Result<(), SigningError> {
    let signatures: Vec<Signature> = candidates::<SIGNATURE_LENGTH>(signature_header, "v1a")?
        .iter()
        .map(Signature::from_bytes)
        .collect();
    if keys.is_empty() || signatures.is_empty() {
        return Err(SigningError::NoMatch);
    }
    // Ed25519 hashes the message as one slice: one copy per request, not per check.
    let content = signed_content(msg_id, timestamp_s, body);
    let matched = keys
        .iter()
        .any(|key| signatures.iter().any(|sig| key.verifies(&content, sig)));
    if matched {
        Ok(())
    } else {
        Err(SigningError::NoMatch)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    // Svix's published key pair and its v1a signature of the Standard Webhooks test message
    // (svix-server README and worker tests).
    const WHSK: &str = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";
    const WHPK: &str = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=";
    const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TIMESTAMP: i64 = 1_614_265_330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const EXPECTED: &str = "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==";

    fn key() -> SigningKey {
        SigningKey::parse(WHSK).expect("valid key")
    }

    fn public() -> VerifyingKey {
        VerifyingKey::parse(WHPK).expect("valid public key")
    }

    #[test]
    fn matches_the_svix_vector() {
        assert_eq!(key().public_key(), public());
        assert_eq!(key().public_key().to_whpk(), WHPK);
        assert_eq!(key().to_whsk(), WHSK);
        assert_eq!(key().sign(MSG_ID, TIMESTAMP, BODY), EXPECTED);
        verify_v1a(&[public()], MSG_ID, TIMESTAMP, BODY, EXPECTED).expect("verifies");
    }

    #[test]
    fn generated_keys_round_trip_and_verify() {
        let mut rng = StdRng::seed_from_u64(7);
        let generated = SigningKey::generate(&mut rng);
        let reparsed = SigningKey::parse(&generated.to_whsk()).expect("round trip");
        assert_eq!(reparsed.to_whsk(), generated.to_whsk());
        let public: VerifyingKey = generated.public_key().to_whpk().parse().expect("whpk");
        assert_eq!(public, generated.public_key());
        let header = reparsed.sign(MSG_ID, TIMESTAMP, BODY);
        verify_v1a(&[public], MSG_ID, TIMESTAMP, BODY, &header).expect("verifies");
        let other = SigningKey::generate(&mut rng);
        assert_ne!(other.to_whsk(), generated.to_whsk());
        assert_eq!(
            verify_v1a(&[other.public_key()], MSG_ID, TIMESTAMP, BODY, &header),
            Err(SigningError::NoMatch)
        );
    }

    #[test]
    fn tampering_fails() {
        let keys = [public()];
        let check =
            |id: &str, ts: i64, body: &[u8], header: &str| verify_v1a(&keys, id, ts, body, header);
        assert_eq!(
            check(MSG_ID, TIMESTAMP, b"{}", EXPECTED),
            Err(SigningError::NoMatch)
        );
        assert_eq!(
            check("msg_x", TIMESTAMP, BODY, EXPECTED),
            Err(SigningError::NoMatch)
        );
        assert_eq!(
            check(MSG_ID, TIMESTAMP + 1, BODY, EXPECTED),
            Err(SigningError::NoMatch)
        );
        // The same signature under another version is not a v1a signature.
        let v1 = EXPECTED.replacen("v1a,", "v1,", 1);
        assert_eq!(
            check(MSG_ID, TIMESTAMP, BODY, &v1),
            Err(SigningError::NoMatch)
        );
        let mut flipped = BASE64.decode(&EXPECTED[4..]).expect("base64");
        flipped[10] ^= 1;
        let flipped = format!("v1a,{}", BASE64.encode(flipped));
        assert_eq!(
            check(MSG_ID, TIMESTAMP, BODY, &flipped),
            Err(SigningError::NoMatch)
        );
        assert_eq!(
            check(MSG_ID, TIMESTAMP, BODY, "v1a,AAAA v1a,!!"),
            Err(SigningError::NoMatch)
        );
        assert_eq!(
            verify_v1a(&[], MSG_ID, TIMESTAMP, BODY, EXPECTED),
            Err(SigningError::NoMatch)
        );
    }

    #[test]
    fn parse_errors_are_named_and_never_show_the_key() {
        let seed_b64 = &WHSK[5..20];
        let err = |text: &str| SigningKey::parse(text).expect_err("refused");
        assert_eq!(
            err(&WHSK[5..]),
            SigningError::KeyPrefix {
                kind: "signing key",
                prefix: "whsk_"
            }
        );
        assert!(matches!(
            err("whsk_@@@"),
            SigningError::KeyBase64 {
                kind: "signing key",
                ..
            }
        ));
        // A seed alone (32 bytes) is not Svix's form.
        let seed_only = format!("whsk_{}", BASE64.encode(key().0.as_bytes()));
        assert_eq!(
            err(&seed_only),
            SigningError::KeyBytes {
                kind: "signing key",
                len: 32,
                expected: 64
            }
        );
        // The public half of another key.
        let mut bytes = BASE64.decode(&WHSK[5..]).expect("base64");
        bytes[40] ^= 1;
        assert_eq!(
            err(&format!("whsk_{}", BASE64.encode(&bytes))),
            SigningError::KeyMismatch
        );
        assert_eq!(
            VerifyingKey::parse(WHSK).expect_err("a whsk_ is no whpk_"),
            SigningError::KeyPrefix {
                kind: "public key",
                prefix: "whpk_"
            }
        );
        assert!(matches!(
            VerifyingKey::parse("whpk_AAAA"),
            Err(SigningError::KeyBytes {
                kind: "public key",
                len: 3,
                expected: 32
            })
        ));
        for error in [err(&seed_only), err("whsk_@@@"), SigningError::KeyMismatch] {
            let text = error.to_string();
            assert!(text.starts_with("signing key"), "{text}");
            assert!(!text.contains(seed_b64), "{text}");
        }
        let debug = format!("{:?}", key());
        assert!(
            !debug.contains(seed_b64) && !debug.contains(&WHSK[5..]),
            "{debug}"
        );
        assert!(debug.contains(WHPK), "{debug}");
    }
}
