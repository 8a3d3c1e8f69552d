//! The signature and timestamp decision, pure: headers, body and the receiver's clock in, a
//! [`Verified`] webhook or a [`Rejection`] out. Reuses `hookline_core::signing`.

use std::time::Duration;

use axum::extract::FromRequestParts;
use hookline_core::signing::{
    SigningError, SigningSecret, VerifyingKey, WEBHOOK_ID, WEBHOOK_SIGNATURE, WEBHOOK_TIMESTAMP,
    check_timestamp, verify, verify_v1a,
};
use http::request::Parts;
use http::{HeaderMap, StatusCode};

/// The longest `webhook-id` accepted, in bytes (it becomes a store key).
pub const MAX_ID_LEN: usize = 256;

/// A webhook whose signature verified: its id and signed time. The layer puts it in the
/// request's extensions; handlers take it as an axum extractor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The `webhook-id` (hookline's event id).
    pub id: String,
    /// The `webhook-timestamp`, epoch seconds.
    pub timestamp_s: i64,
}

impl<S: Send + Sync> FromRequestParts<S> for Verified {
    type Rejection = (StatusCode, &'static str);

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Verified>().cloned().ok_or((
            StatusCode::INTERNAL_SERVER_ERROR,
            "route is not behind the webhook layer",
        ))
    }
}

/// Why a request is refused. Its text is the short reason sent back: it names a header,
/// never a secret or the signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// A Standard Webhooks header is absent.
    #[error("missing {0} header")]
    MissingHeader(&'static str),
    /// A header is not what it must be (not text, not a number, too long).
    #[error("invalid {0} header")]
    InvalidHeader(&'static str),
    /// The timestamp is outside the tolerance.
    #[error("timestamp outside the tolerance")]
    Timestamp,
    /// No signature matches any secret or key.
    #[error("no valid signature")]
    Signature,
    /// `webhook-signature` carries more signatures of one version than
    /// [`MAX_SIGNATURE_CANDIDATES`](hookline_core::signing::MAX_SIGNATURE_CANDIDATES); none was checked.
    #[error("too many signatures")]
    TooManySignatures,
    /// The body is larger than the limit.
    #[error("body too large")]
    BodyTooLarge,
    /// The body could not be read.
    #[error("body could not be read")]
    Body,
}

impl Rejection {
    /// The status it is answered with: 401 for the signature checks, 413 and 400 for the body.
    pub fn status(self) -> StatusCode {
        match self {
            Rejection::MissingHeader(_)
            | Rejection::InvalidHeader(_)
            | Rejection::Timestamp
            | Rejection::Signature
            | Rejection::TooManySignatures => StatusCode::UNAUTHORIZED,
            Rejection::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Rejection::Body => StatusCode::BAD_REQUEST,
        }
    }

    /// A low-cardinality label for logs.
    pub fn code(self) -> &'static str {
        match self {
            Rejection::MissingHeader(_) => "missing_header",
            Rejection::InvalidHeader(_) => "invalid_header",
            Rejection::Timestamp => "timestamp",
            Rejection::Signature => "signature",
            Rejection::TooManySignatures => "too_many_signatures",
            Rejection::BodyTooLarge => "body_too_large",
            Rejection::Body => "body",
        }
    }
}

/// The secrets and public keys a receiver accepts, and its timestamp tolerance.
#[derive(Debug, Clone)]
pub struct Verifier {
    secrets: Vec<SigningSecret>,
    keys: Vec<VerifyingKey>,
    tolerance: Duration,
}

impl Verifier {
    /// A verifier accepting a `v1` signature by any of `secrets` or a `v1a` one by any of
    /// `keys` (several of each during a rotation).
    pub fn new(secrets: Vec<SigningSecret>, keys: Vec<VerifyingKey>, tolerance: Duration) -> Self {
        Verifier {
            secrets,
            keys,
            tolerance,
        }
    }

    /// The decision for one request at `now_s` (epoch seconds): the timestamp first, then
    /// the signatures over the exact body bytes, `v1` then `v1a`. Its cost is bounded by the
    /// secrets and keys, not by the header: one with more than [`MAX_SIGNATURE_CANDIDATES`](hookline_core::signing::MAX_SIGNATURE_CANDIDATES)
    /// signatures of a version is refused with [`Rejection::TooManySignatures`].
    pub fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now_s: i64,
    ) -> Result<Verified, Rejection> {
        let id = header(headers, WEBHOOK_ID)?;
        if id.is_empty() || id.len() > MAX_ID_LEN {
            return Err(Rejection::InvalidHeader(WEBHOOK_ID));
        }
        let timestamp_s: i64 = header(headers, WEBHOOK_TIMESTAMP)?
            .trim()
            .parse()
            .map_err(|_| Rejection::InvalidHeader(WEBHOOK_TIMESTAMP))?;
        check_timestamp(timestamp_s, now_s, self.tolerance).map_err(|_| Rejection::Timestamp)?;
        let signatures = header(headers, WEBHOOK_SIGNATURE)?;
        let outcome = match verify(&self.secrets, id, timestamp_s, body, signatures) {
            Err(SigningError::NoMatch) => verify_v1a(&self.keys, id, timestamp_s, body, signatures),
            v1 => v1,
        };
        outcome.map_err(|error| match error {
            SigningError::TooManySignatures { .. } => Rejection::TooManySignatures,
            _ => Rejection::Signature,
        })?;
        Ok(Verified {
            id: id.to_owned(),
            timestamp_s,
        })
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &'static str) -> Result<&'a str, Rejection> {
    headers
        .get(name)
        .ok_or(Rejection::MissingHeader(name))?
        .to_str()
        .map_err(|_| Rejection::InvalidHeader(name))
}

#[cfg(test)]
mod tests {
    use hookline_core::signing::{MAX_SIGNATURE_CANDIDATES, Signer, SigningKey};
    use http::HeaderValue;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    // The published Standard Webhooks test vector.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: i64 = 1_614_265_330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn secret() -> SigningSecret {
        SigningSecret::parse(SECRET).expect("valid secret")
    }

    fn headers(id: &str, ts: &str, sig: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(WEBHOOK_ID, HeaderValue::from_str(id).expect("header"));
        h.insert(
            WEBHOOK_TIMESTAMP,
            HeaderValue::from_str(ts).expect("header"),
        );
        h.insert(
            WEBHOOK_SIGNATURE,
            HeaderValue::from_str(sig).expect("header"),
        );
        h
    }

    fn verifier(secrets: Vec<SigningSecret>, keys: Vec<VerifyingKey>) -> Verifier {
        Verifier::new(secrets, keys, Duration::from_secs(300))
    }

    #[test]
    fn the_standard_webhooks_vector_verifies_at_a_fixed_clock() {
        let got = verifier(vec![secret()], vec![])
            .verify(&headers(ID, "1614265330", SIGNATURE), BODY, TS + 10)
            .expect("verifies");
        assert_eq!(
            got,
            Verified {
                id: ID.to_owned(),
                timestamp_s: TS
            }
        );
    }

    #[test]
    fn the_tolerance_is_five_minutes_either_way_and_configurable() {
        let v = verifier(vec![secret()], vec![]);
        let h = headers(ID, "1614265330", SIGNATURE);
        assert!(v.verify(&h, BODY, TS + 300).is_ok());
        assert!(v.verify(&h, BODY, TS - 300).is_ok());
        assert_eq!(v.verify(&h, BODY, TS + 301), Err(Rejection::Timestamp));
        assert_eq!(v.verify(&h, BODY, TS - 301), Err(Rejection::Timestamp));
        let strict = Verifier::new(vec![secret()], vec![], Duration::from_secs(5));
        assert_eq!(strict.verify(&h, BODY, TS + 6), Err(Rejection::Timestamp));
        assert!(strict.verify(&h, BODY, TS + 5).is_ok());
    }

    #[test]
    fn tampering_and_missing_headers_are_refused_with_401() {
        let v = verifier(vec![secret()], vec![]);
        let refused = |h: HeaderMap, body: &[u8]| v.verify(&h, body, TS).err();
        assert_eq!(
            refused(headers(ID, "1614265330", SIGNATURE), b"{}"),
            Some(Rejection::Signature)
        );
        assert_eq!(
            refused(headers("msg_other", "1614265330", SIGNATURE), BODY),
            Some(Rejection::Signature)
        );
        assert_eq!(
            refused(headers(ID, "1614265331", SIGNATURE), BODY),
            Some(Rejection::Signature)
        );
        assert_eq!(
            refused(headers(ID, "soon", SIGNATURE), BODY),
            Some(Rejection::InvalidHeader(WEBHOOK_TIMESTAMP))
        );
        assert_eq!(
            refused(
                headers(&"x".repeat(MAX_ID_LEN + 1), "1614265330", SIGNATURE),
                BODY
            ),
            Some(Rejection::InvalidHeader(WEBHOOK_ID))
        );
        let mut h = headers(ID, "1614265330", SIGNATURE);
        h.remove(WEBHOOK_SIGNATURE);
        assert_eq!(
            refused(h, BODY),
            Some(Rejection::MissingHeader(WEBHOOK_SIGNATURE))
        );
        for r in [
            Rejection::Signature,
            Rejection::Timestamp,
            Rejection::MissingHeader(WEBHOOK_ID),
        ] {
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
            assert!(!r.to_string().contains("whsec"), "{r}");
        }
    }

    #[test]
    fn rotation_accepts_any_secret_and_v1a_public_keys() {
        let mut rng = StdRng::seed_from_u64(7);
        let new_secret = SigningSecret::generate(&mut rng);
        let key = SigningKey::generate(&mut rng);
        let signed = Signer::new(vec![new_secret.clone()], vec![key.clone()]).sign(ID, TS, BODY);
        let h = headers(ID, &TS.to_string(), &signed);
        // The old secret alone does not verify it; the new one, or the public key, does.
        assert_eq!(
            verifier(vec![secret()], vec![]).verify(&h, BODY, TS),
            Err(Rejection::Signature)
        );
        assert!(
            verifier(vec![secret(), new_secret], vec![])
                .verify(&h, BODY, TS)
                .is_ok()
        );
        assert!(
            verifier(vec![], vec![key.public_key()])
                .verify(&h, BODY, TS)
                .is_ok()
        );
        let other = SigningKey::generate(&mut rng).public_key();
        assert_eq!(
            verifier(vec![], vec![other]).verify(&h, BODY, TS),
            Err(Rejection::Signature)
        );
    }

    #[test]
    fn a_flood_of_signatures_is_a_401_of_its_own() {
        let mut rng = StdRng::seed_from_u64(8);
        let key = SigningKey::generate(&mut rng);
        let v = verifier(vec![secret()], vec![key.public_key()]);
        let v1a = key.sign(ID, TS, BODY);
        let at = |sig: &str| v.verify(&headers(ID, "1614265330", sig), BODY, TS);
        let repeated = |sig: &str, n: usize| vec![sig; n].join(" ");
        // Even with the right signature among them, past the cap nothing is checked.
        for header in [
            repeated(SIGNATURE, MAX_SIGNATURE_CANDIDATES + 1),
            repeated(SIGNATURE, 50_000),
            format!("v1,AAAA {}", repeated(&v1a, MAX_SIGNATURE_CANDIDATES + 1)),
        ] {
            assert_eq!(at(&header), Err(Rejection::TooManySignatures));
        }
        let r = Rejection::TooManySignatures;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(r.code(), "too_many_signatures");
        // Within the cap, the right one anywhere verifies.
        let wrong = SigningSecret::generate(&mut rng).sign(ID, TS, BODY);
        assert!(at(&format!("{} {SIGNATURE}", repeated(&wrong, 15))).is_ok());
        assert!(at(&format!("{} {v1a}", repeated(&wrong, 15))).is_ok());
    }
}
