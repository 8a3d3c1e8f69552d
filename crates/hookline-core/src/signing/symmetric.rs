//! Symmetric `v1` signatures: `v1,<base64 HMAC-SHA256>` with a `whsec_` secret.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::digest::CtOutput;
use hmac::{Hmac, Mac};
use rand::Rng;
use sha2::Sha256;
use zeroize::Zeroizing;

use super::{
    MAX_SECRET_LEN, MIN_SECRET_LEN, SECRET_PREFIX, SigningError, WEBHOOK_ID, WEBHOOK_SIGNATURE,
    WEBHOOK_TIMESTAMP, candidates,
};

type HmacSha256 = Hmac<Sha256>;

/// The length of an HMAC-SHA256 tag, the only length a `v1` signature can have.
const TAG_LEN: usize = 32;

/// A symmetric signing key, written `whsec_<base64>`. Its `Debug` never shows the key; its
/// bytes are wiped from memory when it is dropped.
#[derive(Clone)]
pub struct SigningSecret(Zeroizing<Vec<u8>>);

impl SigningSecret {
    /// Parses `whsec_<base64 key>`.
    pub fn parse(text: &str) -> Result<Self, SigningError> {
        let b64 = text
            .strip_prefix(SECRET_PREFIX)
            .ok_or(SigningError::MissingPrefix)?;
        let key = BASE64.decode(b64).map_err(SigningError::Base64)?;
        Self::from_bytes(key)
    }

    /// A secret from raw key bytes ([`MIN_SECRET_LEN`] to [`MAX_SECRET_LEN`]).
    pub fn from_bytes(key: Vec<u8>) -> Result<Self, SigningError> {
        if (MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&key.len()) {
            Ok(SigningSecret(Zeroizing::new(key)))
        } else {
            Err(SigningError::KeyLength { len: key.len() })
        }
    }

    /// A new random 32-byte secret.
    pub fn generate(rng: &mut impl Rng) -> Self {
        let mut key = [0u8; 32];
        rng.fill(&mut key);
        SigningSecret(Zeroizing::new(key.to_vec()))
    }

    /// The `whsec_<base64>` text form, to hand to the receiver; this exposes the key.
    pub fn to_whsec(&self) -> String {
        format!("{SECRET_PREFIX}{}", BASE64.encode(self.0.as_slice()))
    }

    fn mac(&self, msg_id: &str, timestamp_s: i64, body: &[u8]) -> HmacSha256 {
        #[cfg(test)]
        super::work::count(|w| &mut w.hmacs);
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC accepts keys of any length");
        mac.update(msg_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp_s.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// This secret's signature: `v1,<base64 HMAC-SHA256 of "{msg_id}.{timestamp_s}.{body}">`.
    pub fn sign(&self, msg_id: &str, timestamp_s: i64, body: &[u8]) -> String {
        let tag = self.mac(msg_id, timestamp_s, body).finalize().into_bytes();
        // "v1," and 44 base64 characters, in one allocation (once per attempt).
        let mut signature = String::with_capacity(47);
        signature.push_str("v1,");
        BASE64.encode_string(tag, &mut signature);
        signature
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret(<redacted>)")
    }
}

impl FromStr for SigningSecret {
    type Err = SigningError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// The `webhook-signature` value: each secret's `v1,<sig>`, space-separated (empty without
/// secrets).
pub fn sign(secrets: &[SigningSecret], msg_id: &str, timestamp_s: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .map(|s| s.sign(msg_id, timestamp_s, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The three Standard Webhooks headers for a delivery.
pub fn signature_headers(
    secrets: &[SigningSecret],
    msg_id: &str,
    timestamp_s: i64,
    body: &[u8],
) -> [(&'static str, String); 3] {
    [
        (WEBHOOK_ID, msg_id.to_owned()),
        (WEBHOOK_TIMESTAMP, timestamp_s.to_string()),
        (WEBHOOK_SIGNATURE, sign(secrets, msg_id, timestamp_s, body)),
    ]
}

/// Checks a `webhook-signature` value as a receiver would: `Ok` when any `v1` signature in
/// it matches any secret. Each secret's tag is computed once, over the body in place, and
/// compared in constant time with every `v1` signature of the right length; other versions
/// are ignored. A value with more than [`MAX_SIGNATURE_CANDIDATES`](super::MAX_SIGNATURE_CANDIDATES)
/// `v1` signatures is refused with [`SigningError::TooManySignatures`] before any HMAC.
/// Check the timestamp separately with [`check_timestamp`](super::check_timestamp).
pub fn verify(
    secrets: &[SigningSecret],
    msg_id: &str,
    timestamp_s: i64,
    body: &[u8],
    signature_header: &str,
) -> Result<(), SigningError> {
    let candidates: Vec<CtOutput<HmacSha256>> = candidates::<TAG_LEN>(signature_header, "v1")?
        .into_iter()
        .map(|tag| CtOutput::new(tag.into()))
        .collect();
    let matched = !candidates.is_empty()
        && secrets.iter().any(|secret| {
            // `CtOutput`'s `==` compares in constant time.
            candidates.contains(&secret.mac(msg_id, timestamp_s, body).finalize())
        });
    if matched {
        Ok(())
    } else {
        Err(SigningError::NoMatch)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DEFAULT_TOLERANCE, check_timestamp};
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    // The published Standard Webhooks test vector.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TIMESTAMP: i64 = 1_614_265_330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const EXPECTED: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn secret() -> SigningSecret {
        SigningSecret::parse(SECRET).expect("valid secret")
    }

    #[test]
    fn matches_the_standard_webhooks_vector() {
        assert_eq!(sign(&[secret()], MSG_ID, TIMESTAMP, BODY), EXPECTED);
        verify(&[secret()], MSG_ID, TIMESTAMP, BODY, EXPECTED).expect("verifies");
    }

    #[test]
    fn rotation_signs_with_every_secret_and_verifies_with_any() {
        let other = SigningSecret::generate(&mut StdRng::seed_from_u64(1));
        let header = sign(&[other.clone(), secret()], MSG_ID, TIMESTAMP, BODY);
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1], EXPECTED);
        verify(&[secret()], MSG_ID, TIMESTAMP, BODY, &header).expect("old secret verifies");
        verify(&[other], MSG_ID, TIMESTAMP, BODY, &header).expect("new secret verifies");
    }

    #[test]
    fn tampering_fails() {
        let s = [secret()];
        assert_eq!(
            verify(&s, MSG_ID, TIMESTAMP, b"{}", EXPECTED),
            Err(SigningError::NoMatch)
        );
        assert_eq!(
            verify(&s, "msg_x", TIMESTAMP, BODY, EXPECTED),
            Err(SigningError::NoMatch)
        );
        assert_eq!(
            verify(&s, MSG_ID, TIMESTAMP + 1, BODY, EXPECTED),
            Err(SigningError::NoMatch)
        );
        let v2 = EXPECTED.replacen("v1,", "v2,", 1);
        assert_eq!(
            verify(&s, MSG_ID, TIMESTAMP, BODY, &v2),
            Err(SigningError::NoMatch)
        );
        assert_eq!(
            verify(&s, MSG_ID, TIMESTAMP, BODY, "garbage v1,!!"),
            Err(SigningError::NoMatch)
        );
        assert_eq!(
            verify(&[], MSG_ID, TIMESTAMP, BODY, EXPECTED),
            Err(SigningError::NoMatch)
        );
    }

    #[test]
    fn secret_parsing_and_redaction() {
        assert_eq!(
            SigningSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").err(),
            Some(SigningError::MissingPrefix)
        );
        assert!(matches!(
            SigningSecret::parse("whsec_@@@"),
            Err(SigningError::Base64(_))
        ));
        assert_eq!(
            SigningSecret::parse("whsec_c2hvcnQ=").err(),
            Some(SigningError::KeyLength { len: 5 })
        );
        let debug = format!("{:?}", secret());
        assert!(!debug.contains("MfKQ"), "{debug}");
        assert_eq!(secret().to_whsec(), SECRET);
        let generated = SigningSecret::generate(&mut StdRng::seed_from_u64(9));
        let reparsed: SigningSecret = generated.to_whsec().parse().expect("round trip");
        assert_eq!(reparsed.to_whsec(), generated.to_whsec());
    }

    #[test]
    fn headers_and_timestamps() {
        let headers = signature_headers(&[secret()], MSG_ID, TIMESTAMP, BODY);
        assert_eq!(headers[0], (WEBHOOK_ID, MSG_ID.to_owned()));
        assert_eq!(headers[1], (WEBHOOK_TIMESTAMP, "1614265330".to_owned()));
        assert_eq!(headers[2], (WEBHOOK_SIGNATURE, EXPECTED.to_owned()));
        check_timestamp(TIMESTAMP, TIMESTAMP + 300, DEFAULT_TOLERANCE).expect("within");
        check_timestamp(TIMESTAMP, TIMESTAMP - 300, DEFAULT_TOLERANCE).expect("within");
        assert!(check_timestamp(TIMESTAMP, TIMESTAMP + 301, DEFAULT_TOLERANCE).is_err());
        assert!(check_timestamp(i64::MIN, i64::MAX, DEFAULT_TOLERANCE).is_err());
    }
}
