//! Standard Webhooks signatures, checked the way a receiver checks them and apart from
//! hookline's own signing code: `webhook-signature` holds space-separated `v1,<base64>`
//! entries, each the HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` keyed with
//! the bytes whose base64 follows `whsec_` in the endpoint's secret.

use anyhow::{Context as _, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Verifies the signatures of one endpoint's secret.
#[derive(Clone)]
pub struct Verifier {
    key: Vec<u8>,
}

impl Verifier {
    /// A verifier for a `whsec_<base64>` secret.
    pub fn new(secret: &str) -> anyhow::Result<Self> {
        let Some(encoded) = secret.strip_prefix("whsec_") else {
            bail!("a signing secret starts with whsec_");
        };
        let key = STANDARD
            .decode(encoded)
            .context("the secret after whsec_ is not base64")?;
        Ok(Verifier { key })
    }

    /// Whether one `v1` entry of `header` is the signature of `id.timestamp.body`.
    pub fn verify(&self, id: &str, timestamp: &str, body: &[u8], header: &str) -> bool {
        header
            .split_whitespace()
            .filter_map(|entry| entry.strip_prefix("v1,"))
            .filter_map(|signature| STANDARD.decode(signature).ok())
            .any(|signature| {
                let mut mac = self.mac();
                mac.update(id.as_bytes());
                mac.update(b".");
                mac.update(timestamp.as_bytes());
                mac.update(b".");
                mac.update(body);
                // Constant-time comparison.
                mac.verify_slice(&signature).is_ok()
            })
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes keys of any length: this cannot fail.
        Hmac::<Sha256>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!())
    }
}

#[cfg(test)]
mod tests {
    use hookline_core::signing::SigningSecret;

    use super::*;

    /// The example of the Standard Webhooks specification's reference libraries.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TIMESTAMP: &str = "1614265330";
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn accepts_the_reference_example() {
        let verifier = Verifier::new(SECRET).unwrap();
        assert!(verifier.verify(ID, TIMESTAMP, BODY, SIGNATURE));
    }

    #[test]
    fn refuses_any_change() {
        let verifier = Verifier::new(SECRET).unwrap();
        assert!(!verifier.verify("msg_other", TIMESTAMP, BODY, SIGNATURE));
        assert!(!verifier.verify(ID, "1614265331", BODY, SIGNATURE));
        assert!(!verifier.verify(ID, TIMESTAMP, br#"{"test": 2432232315}"#, SIGNATURE));
        assert!(!verifier.verify(ID, TIMESTAMP, BODY, "v1,AAAA"));
        assert!(!verifier.verify(
            ID,
            TIMESTAMP,
            BODY,
            "v1a,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        ));
        assert!(!verifier.verify(ID, TIMESTAMP, BODY, ""));
        let other = SigningSecret::generate(&mut rand::rng()).to_whsec();
        assert!(
            !Verifier::new(&other)
                .unwrap()
                .verify(ID, TIMESTAMP, BODY, SIGNATURE)
        );
    }

    #[test]
    fn one_matching_entry_among_several_is_enough() {
        let verifier = Verifier::new(SECRET).unwrap();
        let header = format!("v1,bm9wZQ== {SIGNATURE}");
        assert!(verifier.verify(ID, TIMESTAMP, BODY, &header));
    }

    #[test]
    fn agrees_with_what_hookline_signs() {
        let secret = SigningSecret::generate(&mut rand::rng());
        let header = secret.sign("evt_1", 1_700_000_000, b"{}");
        let verifier = Verifier::new(&secret.to_whsec()).unwrap();
        assert!(verifier.verify("evt_1", "1700000000", b"{}", &header));
        assert!(!verifier.verify("evt_1", "1700000000", b"{ }", &header));
    }

    #[test]
    fn refuses_secrets_that_are_not_whsec() {
        assert!(Verifier::new("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_err());
        assert!(Verifier::new("whsec_!!!").is_err());
    }
}
