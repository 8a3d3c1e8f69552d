//! The receiver's user-facing configuration, converted once into [`ReceiverSettings`].

use std::time::Duration;

use hookline_core::secret::Secret;
use hookline_core::signing::{
    DEFAULT_TOLERANCE, PUBLIC_KEY_PREFIX, SECRET_PREFIX, SigningError, SigningSecret, VerifyingKey,
};
use serde::Deserialize;

use crate::verify::Verifier;

/// What to do when the de-duplication store cannot answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnStoreError {
    /// Answer 503 so the sender retries later: exactly-once over availability (the default).
    #[default]
    Reject,
    /// Run the handler without de-duplication: availability over exactly-once.
    Process,
}

/// The receiver's configuration (for a file or environment layer).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReceiverConfig {
    /// `whsec_` secrets for `v1` signatures (several during a rotation) and `whpk_` public
    /// keys for `v1a` ones; `${env:NAME}` and `${file:PATH}` references are resolved.
    pub secrets: Vec<Secret>,
    /// How far `webhook-timestamp` may be from the receiver's clock, in seconds.
    pub tolerance_s: u64,
    /// The largest body read, in bytes; a larger one is refused with 413.
    pub max_body_bytes: usize,
    /// How long a webhook id is remembered, in seconds; at least twice `tolerance_s`. A
    /// timestamp is accepted up to `tolerance_s` behind or ahead of the clock, so a copy of
    /// a delivery stays in time for up to twice that after the first arrived: a shorter TTL
    /// would forget the id while a replay still verifies. Unset, it is a day, or twice
    /// `tolerance_s` when that is longer.
    pub dedup_ttl_s: Option<u64>,
    /// How long a claim holds an id while its handler runs, in seconds (60 by default, at
    /// most the TTL): copies get 409 meanwhile; after it (a receiver that crashed
    /// mid-handler) a retry is processed. Longer than the slowest handler.
    pub processing_lease_s: u64,
    /// What to do when the store cannot answer.
    pub on_store_error: OnStoreError,
}

/// The TTL of an id when `dedup_ttl_s` is unset and twice `tolerance_s` is shorter: a day.
const DEFAULT_DEDUP_TTL_S: u64 = 24 * 60 * 60;

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            secrets: Vec::new(),
            tolerance_s: DEFAULT_TOLERANCE.as_secs(),
            max_body_bytes: 1024 * 1024,
            dedup_ttl_s: None,
            processing_lease_s: 60,
            on_store_error: OnStoreError::Reject,
        }
    }
}

/// A configuration that cannot be used. Names the field and the entry, never its value.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// An entry of `secrets` is neither a valid `whsec_` secret nor a `whpk_` key.
    #[error("secrets[{index}] is not usable: {source}")]
    Secret {
        /// Its position in `secrets`.
        index: usize,
        /// What is wrong with it (never its value).
        #[source]
        source: SigningError,
    },
    /// `dedup_ttl_s` is set below twice `tolerance_s`, so a replay could verify after its
    /// id was forgotten.
    #[error(
        "dedup_ttl_s ({dedup_ttl_s}) must be at least twice tolerance_s ({tolerance_s}): \
         a copy replayed after its id is forgotten would still be in time"
    )]
    ReplayWindow {
        /// The TTL set, in seconds.
        dedup_ttl_s: u64,
        /// The tolerance, in seconds.
        tolerance_s: u64,
    },
    /// A field is out of range.
    #[error("{field} must be {what}")]
    Range {
        /// The field.
        field: &'static str,
        /// What it must be.
        what: &'static str,
    },
}

/// Validated settings: the verifier and the limits, in the units the layer uses.
#[derive(Debug, Clone)]
pub struct ReceiverSettings {
    /// The signature checks.
    pub verifier: Verifier,
    /// The largest body read.
    pub max_body_bytes: usize,
    /// How long an id is remembered: `dedup_ttl_s`, or the TTL derived from `tolerance_s`.
    pub dedup_ttl: Duration,
    /// How long a claim holds an id while its handler runs.
    pub processing_lease: Duration,
    /// What to do when the store cannot answer.
    pub on_store_error: OnStoreError,
}

impl ReceiverConfig {
    /// A configuration with these secrets and keys and the defaults otherwise.
    pub fn with_secrets(secrets: impl IntoIterator<Item = Secret>) -> Self {
        ReceiverConfig {
            secrets: secrets.into_iter().collect(),
            ..ReceiverConfig::default()
        }
    }

    /// The TTL of an id: `dedup_ttl_s` if set and at least twice `tolerance_s`, refused if
    /// set below; unset, a day or twice `tolerance_s`, whichever is longer.
    fn effective_dedup_ttl_s(&self) -> Result<u64, ConfigError> {
        let replay_window_s = self.tolerance_s.saturating_mul(2);
        match self.dedup_ttl_s {
            Some(dedup_ttl_s) if dedup_ttl_s < replay_window_s => Err(ConfigError::ReplayWindow {
                dedup_ttl_s,
                tolerance_s: self.tolerance_s,
            }),
            Some(dedup_ttl_s) => Ok(dedup_ttl_s),
            None => Ok(DEFAULT_DEDUP_TTL_S.max(replay_window_s)),
        }
    }

    /// Validates it once.
    pub fn into_settings(self) -> Result<ReceiverSettings, ConfigError> {
        if self.secrets.is_empty() {
            return Err(ConfigError::Range {
                field: "secrets",
                what: "at least one whsec_ secret or whpk_ public key",
            });
        }
        let range = |ok: bool, field, what| {
            if ok {
                Ok(())
            } else {
                Err(ConfigError::Range { field, what })
            }
        };
        range(self.tolerance_s > 0, "tolerance_s", "at least 1")?;
        range(self.max_body_bytes > 0, "max_body_bytes", "at least 1")?;
        let dedup_ttl_s = self.effective_dedup_ttl_s()?;
        range(
            (1..=dedup_ttl_s).contains(&self.processing_lease_s),
            "processing_lease_s",
            "at least 1 and at most dedup_ttl_s",
        )?;
        let mut secrets = Vec::new();
        let mut keys = Vec::new();
        for (index, entry) in self.secrets.iter().enumerate() {
            let text = entry.expose().trim();
            let parsed = if text.starts_with(PUBLIC_KEY_PREFIX) {
                VerifyingKey::parse(text).map(|k| keys.push(k))
            } else if text.starts_with(SECRET_PREFIX) {
                SigningSecret::parse(text).map(|s| secrets.push(s))
            } else {
                Err(SigningError::MissingPrefix)
            };
            parsed.map_err(|source| ConfigError::Secret { index, source })?;
        }
        Ok(ReceiverSettings {
            verifier: Verifier::new(secrets, keys, Duration::from_secs(self.tolerance_s)),
            max_body_bytes: self.max_body_bytes,
            dedup_ttl: Duration::from_secs(dedup_ttl_s),
            processing_lease: Duration::from_secs(self.processing_lease_s),
            on_store_error: self.on_store_error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_entry_never_its_value() {
        let config = ReceiverConfig::with_secrets([
            Secret::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            Secret::new("whsec_c2hvcnRzZWNyZXQ="),
        ]);
        let error = config
            .into_settings()
            .expect_err("a short key is refused")
            .to_string();
        assert!(error.starts_with("secrets[1]"), "{error}");
        assert!(!error.contains("c2hvcnRzZWNyZXQ"), "{error}");
        assert!(ReceiverConfig::default().into_settings().is_err());
    }

    #[test]
    fn the_lease_is_shorter_than_the_ttl() {
        let mut config =
            ReceiverConfig::with_secrets([Secret::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")]);
        config.tolerance_s = 15;
        config.dedup_ttl_s = Some(30);
        let error = config.clone().into_settings().expect_err("60 s > 30 s");
        assert_eq!(
            error.to_string(),
            "processing_lease_s must be at least 1 and at most dedup_ttl_s"
        );
        config.processing_lease_s = 0;
        assert!(config.clone().into_settings().is_err());
        config.processing_lease_s = 30;
        assert_eq!(
            config.into_settings().expect("valid").processing_lease,
            Duration::from_secs(30)
        );
    }

    #[test]
    fn defaults_are_five_minutes_a_minute_and_a_day() {
        let settings =
            ReceiverConfig::with_secrets([Secret::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")])
                .into_settings()
                .expect("valid");
        assert_eq!(settings.dedup_ttl, Duration::from_secs(86_400));
        assert_eq!(settings.processing_lease, Duration::from_secs(60));
        assert_eq!(settings.on_store_error, OnStoreError::Reject);
    }

    /// A config as a user writes it (JSON here; TOML and environment layers deserialize
    /// the same struct), with the test secret.
    fn written(fields: &str) -> ReceiverConfig {
        let text =
            format!(r#"{{"secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], {fields}}}"#);
        serde_json::from_str(&text).expect("config deserializes")
    }

    #[test]
    fn a_dedup_ttl_shorter_than_twice_the_tolerance_is_refused() {
        for (fields, tolerance_s, ttl_s) in [
            (r#""tolerance_s": 300, "dedup_ttl_s": 599"#, 300, 599),
            (r#""dedup_ttl_s": 599"#, 300, 599),
            (
                r#""tolerance_s": 86400, "dedup_ttl_s": 86400"#,
                86_400,
                86_400,
            ),
        ] {
            let error = written(fields)
                .into_settings()
                .expect_err("a copy replayed after its id expired would still verify")
                .to_string();
            assert_eq!(
                error,
                format!(
                    "dedup_ttl_s ({ttl_s}) must be at least twice tolerance_s ({tolerance_s}): \
                     a copy replayed after its id is forgotten would still be in time"
                )
            );
            assert!(!error.contains("MfKQ"), "{error}");
        }
        let settings = written(r#""tolerance_s": 300, "dedup_ttl_s": 600"#)
            .into_settings()
            .expect("twice the tolerance is enough");
        assert_eq!(settings.dedup_ttl, Duration::from_secs(600));
    }

    #[test]
    fn an_unset_dedup_ttl_follows_the_tolerance() {
        for (tolerance_s, ttl_s) in [
            (300, 86_400),
            (43_200, 86_400),
            (86_400, 172_800),
            (u64::MAX, u64::MAX),
        ] {
            let settings = written(&format!(r#""tolerance_s": {tolerance_s}"#))
                .into_settings()
                .expect("an unset TTL is derived, not refused");
            assert_eq!(
                settings.dedup_ttl,
                Duration::from_secs(ttl_s),
                "{tolerance_s}"
            );
        }
    }
}
