//! The `[ledger]` section as configured, and its validation into [`LedgerSettings`].

use std::time::Duration;

use hookline_core::secret::Secret;
use serde::{Deserialize, Serialize};

use crate::error::{DispatchError, Result};
use crate::ledger::{LedgerSettings, PgSettings, RedisSettings, postgres_schema_ok};
use crate::settings::positive;

/// The delivery ledger: with a Redis URL, each delivery acknowledged with a 2xx is
/// remembered (`SET NX` with a TTL) and a second copy of the same event to the same
/// endpoint is not delivered again while it is remembered. With a PostgreSQL URL, every
/// delivery's state is kept in `webhook_deliveries` (with an audit trail), and a copy that
/// finds another copy in flight under a live lease is put off. Both: Redis is asked first,
/// PostgreSQL is the record of truth.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LedgerConfig {
    /// `redis://[:password@]host:port[/db]` (`rediss://` for TLS); absent or empty: no
    /// Redis ledger. With one, start-up fails if Redis does not answer a PING.
    pub redis_url: Option<String>,
    /// How long a delivery is remembered in Redis, in seconds.
    pub ttl_s: u64,
    /// Prepended to every key (`<prefix><length of the endpoint id>:<endpoint id>:<event id>`).
    pub key_prefix: String,
    /// The most one Redis command or PostgreSQL statement may take, in milliseconds; past
    /// it the delivery goes on without the ledger's help.
    pub timeout_ms: u64,
    /// `postgres://user:password@host:port/database[?sslmode=require]`, a secret
    /// (`${env:NAME}`/`${file:PATH}` allowed); absent or empty: no PostgreSQL ledger. A
    /// PostgreSQL that is down does not stop start-up: deliveries go on, errors are counted.
    #[serde(skip_serializing)]
    pub postgres_url: Option<Secret>,
    /// The schema of the ledger's tables (made, with the tables, at start-up).
    pub postgres_schema: String,
    /// How long a copy being delivered holds the delivery against other copies, in
    /// milliseconds; longer than an attempt (`http.timeout_ms`) and its admission.
    pub lease_ms: u64,
    /// Rows not updated for this long are removed (and audit rows as old), in seconds.
    pub retention_s: u64,
    /// Rows removed per statement.
    pub retention_batch: u32,
    /// How often old rows are removed, in seconds.
    pub retention_interval_s: u64,
    /// PostgreSQL connections per dispatcher.
    pub postgres_max_connections: u32,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            redis_url: None,
            ttl_s: 7 * 24 * 60 * 60,
            key_prefix: "hookline:delivered:".to_owned(),
            timeout_ms: 1_000,
            postgres_url: None,
            postgres_schema: "public".to_owned(),
            lease_ms: 60_000,
            retention_s: 7 * 24 * 60 * 60,
            retention_batch: 1_000,
            retention_interval_s: 600,
            postgres_max_connections: 8,
        }
    }
}

impl LedgerConfig {
    /// `None` without a URL; otherwise validated settings (URLs are parsed, not dialled).
    /// Errors name the field, never a URL's password.
    pub(crate) fn to_settings(&self) -> Result<Option<LedgerSettings>> {
        let redis = self.redis()?;
        let postgres = self.postgres()?;
        let settings = LedgerSettings { redis, postgres };
        Ok(settings.is_configured().then_some(settings))
    }

    fn redis(&self) -> Result<Option<RedisSettings>> {
        let Some(url) = self
            .redis_url
            .as_deref()
            .map(str::trim)
            .filter(|url| !url.is_empty())
        else {
            return Ok(None);
        };
        positive("ledger.ttl_s", self.ttl_s)?;
        positive("ledger.timeout_ms", self.timeout_ms)?;
        let settings = RedisSettings {
            redis_url: url.to_owned(),
            ttl: Duration::from_secs(self.ttl_s),
            key_prefix: self.key_prefix.clone(),
            timeout: Duration::from_millis(self.timeout_ms),
        };
        settings
            .client()
            .map_err(|error| DispatchError::config("ledger.redis_url", error.to_string()))?;
        Ok(Some(settings))
    }

    fn postgres(&self) -> Result<Option<PgSettings>> {
        let Some(url) = self
            .postgres_url
            .as_ref()
            .filter(|url| !url.expose().trim().is_empty())
        else {
            return Ok(None);
        };
        positive("ledger.timeout_ms", self.timeout_ms)?;
        positive("ledger.lease_ms", self.lease_ms)?;
        positive("ledger.retention_s", self.retention_s)?;
        positive("ledger.retention_batch", u64::from(self.retention_batch))?;
        positive("ledger.retention_interval_s", self.retention_interval_s)?;
        positive(
            "ledger.postgres_max_connections",
            u64::from(self.postgres_max_connections),
        )?;
        if !postgres_schema_ok(&self.postgres_schema) {
            return Err(DispatchError::config(
                "ledger.postgres_schema",
                "must be lower-case letters, digits and `_`, starting with a letter or `_`",
            ));
        }
        let settings = PgSettings {
            url: Secret::new(url.expose().trim()),
            schema: self.postgres_schema.clone(),
            lease: Duration::from_millis(self.lease_ms),
            timeout: Duration::from_millis(self.timeout_ms),
            retention: Duration::from_secs(self.retention_s),
            retention_batch: self.retention_batch,
            retention_interval: Duration::from_secs(self.retention_interval_s),
            max_connections: self.postgres_max_connections,
        };
        settings.connect_options().map_err(|reason| {
            DispatchError::config(
                "ledger.postgres_url",
                format!(
                    "not a PostgreSQL URL (postgres://user:password@host:port/database): {reason}"
                ),
            )
        })?;
        Ok(Some(settings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_postgres_url_is_checked_and_never_shown() {
        let mut config = LedgerConfig {
            postgres_url: Some(Secret::new("mysql://hookline:hunter2pw@db/x")),
            ..LedgerConfig::default()
        };
        let error = config.to_settings().expect_err("not postgres").to_string();
        assert!(error.contains("ledger.postgres_url"), "{error}");
        assert!(!error.contains("hunter2pw"), "{error}");

        config.postgres_url = Some(Secret::new("postgres://hookline:hunter2pw@db:5433/x"));
        let settings = config.to_settings().expect("valid").expect("configured");
        let postgres = settings.postgres.expect("postgres");
        assert_eq!(postgres.lease, Duration::from_secs(60));
        assert!(settings.redis.is_none());
        assert!(!format!("{postgres:?}").contains("hunter2pw"));

        config.postgres_schema = "x; drop".to_owned();
        let error = config.to_settings().expect_err("schema").to_string();
        assert!(error.contains("ledger.postgres_schema"), "{error}");

        config.postgres_url = Some(Secret::new("  "));
        assert!(config.to_settings().expect("off").is_none());
    }
}
