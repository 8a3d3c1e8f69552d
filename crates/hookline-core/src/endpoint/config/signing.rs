//! The signing fields of an endpoint config: `secrets` (`whsec_`, for `v1`) and
//! `signing_keys` (`whsk_`, for `v1a`), of which an endpoint needs at least one, and
//! `override_secrets`, which alone sign deliveries to an event's own URL. Errors name the
//! field and its index, never the value.

use super::{EndpointConfig, MAX_SECRETS, invalid};
use crate::endpoint::EndpointError;
use crate::signing::{SigningKey, SigningSecret};

/// Most signing keys an endpoint may have at once.
pub const MAX_SIGNING_KEYS: usize = 10;

impl EndpointConfig {
    /// The parsed secrets and signing keys.
    pub(super) fn signing(&self) -> Result<(Vec<SigningSecret>, Vec<SigningKey>), EndpointError> {
        if self.secrets.is_empty() && self.signing_keys.is_empty() {
            return Err(invalid(
                "secrets",
                "needs at least one `whsec_` secret or `whsk_` signing key (`signing_keys`)",
            ));
        }
        if self.secrets.len() > MAX_SECRETS {
            return Err(invalid(
                "secrets",
                format!("has more than {MAX_SECRETS} secrets"),
            ));
        }
        if self.signing_keys.len() > MAX_SIGNING_KEYS {
            return Err(invalid(
                "signing_keys",
                format!("has more than {MAX_SIGNING_KEYS} keys"),
            ));
        }
        let secrets = self
            .secrets
            .iter()
            .enumerate()
            .map(|(index, s)| {
                SigningSecret::parse(s).map_err(|source| EndpointError::Secret { index, source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let keys = self
            .signing_keys
            .iter()
            .enumerate()
            .map(|(index, k)| {
                SigningKey::parse(k).map_err(|source| EndpointError::SigningKey { index, source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((secrets, keys))
    }

    /// The parsed override secrets: only with `allow_url_override`, and none of them one of
    /// `secrets` (it would let an override's receiver replay to the endpoint's own URL).
    pub(super) fn override_signing(&self) -> Result<Vec<SigningSecret>, EndpointError> {
        if self.override_secrets.is_empty() {
            return Ok(Vec::new());
        }
        if !self.allow_url_override {
            return Err(invalid(
                "override_secrets",
                "signs deliveries to an event's own URL, which needs `allow_url_override`",
            ));
        }
        if self.override_secrets.len() > MAX_SECRETS {
            return Err(invalid(
                "override_secrets",
                format!("has more than {MAX_SECRETS} secrets"),
            ));
        }
        let mut parsed = Vec::with_capacity(self.override_secrets.len());
        for (index, text) in self.override_secrets.iter().enumerate() {
            let secret = SigningSecret::parse(text).map_err(|source| {
                invalid(format!("override_secrets[{index}]"), source.to_string())
            })?;
            if self.secrets.iter().any(|own| own == text) {
                return Err(invalid(
                    format!("override_secrets[{index}]"),
                    "is one of `secrets`: an override's receiver could replay to the endpoint",
                ));
            }
            parsed.push(secret);
        }
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const WHSK: &str = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";
    const WHPK: &str = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=";

    fn keys_only(keys: Vec<String>) -> EndpointConfig {
        EndpointConfig {
            signing_keys: keys,
            ..EndpointConfig::new("https://example.com/hook", Vec::new())
        }
    }

    #[test]
    fn an_endpoint_with_keys_only_signs_v1a() {
        let json = format!(
            r#"{{"url":"https://example.com/hook","secrets":[],"signing_keys":["{WHSK}"]}}"#
        );
        let config = EndpointConfig::from_json(json.as_bytes()).expect("keys alone are enough");
        assert_eq!(config, keys_only(vec![WHSK.into()]));
        assert_eq!(
            EndpointConfig::from_json(&config.to_json()).ok(),
            Some(config.clone())
        );
        let endpoint = config.to_endpoint().expect("valid");
        assert_eq!(endpoint.signing_keys.len(), 1);
        assert_eq!(endpoint.signing_keys[0].public_key().to_whpk(), WHPK);
        let header = endpoint.signer().sign("msg_1", 1, b"{}");
        assert!(
            header.starts_with("v1a,") && !header.contains(' '),
            "{header}"
        );
        // Without the field a config reads as before and writes no `signing_keys`.
        let plain = EndpointConfig::new("https://example.com/hook", vec![SECRET.into()]);
        assert!(!String::from_utf8_lossy(&plain.to_json()).contains("signing_keys"));
    }

    #[test]
    fn neither_secrets_nor_keys_is_refused() {
        let err = keys_only(Vec::new())
            .validate()
            .expect_err("nothing to sign with");
        assert!(
            matches!(&err, EndpointError::Invalid { field, .. } if field == "secrets"),
            "{err}"
        );
        assert!(err.to_string().contains("signing_keys"), "{err}");
    }

    #[test]
    fn bad_keys_are_named_by_index_never_shown() {
        let mut rng = StdRng::seed_from_u64(1);
        let good = SigningKey::generate(&mut rng).to_whsk();
        // A key whose public half was changed: the private half must not leak into the error.
        let mut bad = good.clone();
        bad.replace_range(60..62, if &good[60..62] == "AA" { "BB" } else { "AA" });
        for (keys, index) in [
            (vec![good.clone(), "nope".to_owned()], 1),
            (vec![bad.clone()], 0),
            (vec![good.clone(), good.clone(), SECRET.to_owned()], 2),
        ] {
            let err = keys_only(keys).validate().expect_err("refused");
            let text = err.to_string();
            assert!(
                matches!(err, EndpointError::SigningKey { index: i, .. } if i == index),
                "{text}"
            );
            assert!(
                text.starts_with(&format!("invalid `signing_keys[{index}]`: ")),
                "{text}"
            );
            assert!(
                !text.contains(&good[5..30]) && !text.contains(&bad[5..30]),
                "{text}"
            );
        }
        let eleven: Vec<String> = (0..11)
            .map(|_| SigningKey::generate(&mut rng).to_whsk())
            .collect();
        let err = keys_only(eleven).validate().expect_err("too many");
        assert!(
            matches!(&err, EndpointError::Invalid { field, .. } if field == "signing_keys"),
            "{err}"
        );
    }

    #[test]
    fn debug_never_shows_a_key() {
        let config = EndpointConfig {
            signing_keys: vec![WHSK.into()],
            ..EndpointConfig::new("https://example.com/hook", vec![SECRET.into()])
        };
        let endpoint = config.to_endpoint().expect("valid");
        for debug in [format!("{config:?}"), format!("{endpoint:?}")] {
            assert!(
                !debug.contains(&WHSK[5..]) && !debug.contains(&SECRET[6..]),
                "{debug}"
            );
        }
        assert!(format!("{config:?}").contains("signing_keys: <1 redacted>"));
        assert!(format!("{endpoint:?}").contains(WHPK));
    }

    #[test]
    fn override_secrets_need_the_opt_in_and_differ_from_the_secrets() {
        const OTHER: &str = "whsec_b3ZlcnJpZGUtb25seS1zZWNyZXQtMTIzNDU2Nzg=";
        let with = |allow: bool, overrides: Vec<&str>| EndpointConfig {
            allow_url_override: allow,
            override_secrets: overrides.into_iter().map(str::to_owned).collect(),
            ..EndpointConfig::new("https://example.com/hook", vec![SECRET.into()])
        };
        let endpoint = with(true, vec![OTHER]).to_endpoint().expect("valid");
        assert_eq!(endpoint.override_secrets.len(), 1);
        assert!(!endpoint.override_signer().is_empty());
        assert!(
            with(true, vec![])
                .to_endpoint()
                .expect("valid")
                .override_signer()
                .is_empty()
        );
        let refused = |config: EndpointConfig, field: &str, says: &str| {
            let error = config.validate().expect_err("refused").to_string();
            assert!(error.contains(field) && error.contains(says), "{error}");
            assert!(
                !error.contains(&OTHER[6..]) && !error.contains(&SECRET[6..]),
                "{error}"
            );
        };
        refused(
            with(false, vec![OTHER]),
            "override_secrets",
            "allow_url_override",
        );
        refused(
            with(true, vec![OTHER, SECRET]),
            "override_secrets[1]",
            "one of `secrets`",
        );
        refused(with(true, vec!["whsec_short"]), "override_secrets[0]", "");
        // Kept through the record's JSON, and out of its Debug.
        let config = with(true, vec![OTHER]);
        let back = EndpointConfig::from_json(&config.to_json()).expect("round trip");
        assert_eq!(back, config);
        assert!(!format!("{config:?}").contains(&OTHER[6..]));
    }
}
