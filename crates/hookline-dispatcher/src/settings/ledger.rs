//! The delivery ledger's validated settings (Redis, PostgreSQL, or both), converted from the
//! `[ledger]` section: URLs are parsed, not dialled, and never shown with their password.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use hookline_core::secret::Secret;
use redis::Client;
use sqlx::postgres::PgConnectOptions;

use super::check::positive;
use crate::config::LedgerConfig;
use crate::error::{DispatchError, LedgerError, LedgerResult, Result};

/// Validated ledger settings: Redis, PostgreSQL, or both.
#[derive(Clone, Debug, Default)]
pub struct LedgerSettings {
    /// The Redis ledger, when `ledger.redis_url` is set.
    pub redis: Option<RedisSettings>,
    /// The PostgreSQL ledger, when `ledger.postgres_url` is set.
    pub postgres: Option<PgSettings>,
}

impl LedgerSettings {
    /// Whether any ledger is configured.
    pub fn is_configured(&self) -> bool {
        self.redis.is_some() || self.postgres.is_some()
    }
}

/// Validated Redis ledger settings.
#[derive(Clone)]
pub struct RedisSettings {
    /// `redis://[:password@]host:port[/db]` (or `rediss://` for TLS).
    pub redis_url: String,
    /// How long a delivery is remembered.
    pub ttl: Duration,
    /// Prepended to every key.
    pub key_prefix: String,
    /// The most one Redis command may take, connecting included.
    pub timeout: Duration,
}

impl RedisSettings {
    /// The URL with its password hidden, for logs and errors.
    pub fn redacted_url(&self) -> String {
        redact(&self.redis_url)
    }

    /// Checks that the URL is one the client can use (without connecting).
    pub(crate) fn client(&self) -> LedgerResult<Client> {
        Client::open(self.redis_url.as_str()).map_err(|source| LedgerError::BadUrl {
            url: self.redacted_url(),
            source,
        })
    }
}

impl fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSettings")
            .field("redis_url", &self.redacted_url())
            .field("ttl", &self.ttl)
            .field("key_prefix", &self.key_prefix)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Hides a URL's password (`redis://user:***@host`).
fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // Setting a password fails only on URLs that cannot have one.
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(parsed) => parsed.to_string(),
        Err(_) => "<unparsable URL>".to_owned(),
    }
}

/// Validated PostgreSQL ledger settings.
#[derive(Clone, Debug)]
pub struct PgSettings {
    /// `postgres://user:password@host:port/database` (a secret: it may hold a password).
    pub url: Secret,
    /// The schema of the ledger's tables (made when missing).
    pub schema: String,
    /// How long a copy being delivered holds the delivery against other copies.
    pub lease: Duration,
    /// The most one statement may take, a connection included.
    pub timeout: Duration,
    /// Rows not updated for this long are removed.
    pub retention: Duration,
    /// Rows removed per statement.
    pub retention_batch: u32,
    /// How often the retention runs.
    pub retention_interval: Duration,
    /// Connections in the pool.
    pub max_connections: u32,
}

impl PgSettings {
    /// The client's options from the URL, with the schema as the search path. The reason
    /// of a failure never holds the URL or its password.
    pub(crate) fn connect_options(&self) -> Result<PgConnectOptions, String> {
        let url = self.url.expose();
        let parsed = url::Url::parse(url).map_err(|error| error.to_string())?;
        if !matches!(parsed.scheme(), "postgres" | "postgresql") {
            return Err("not a postgres:// URL".to_owned());
        }
        let options = PgConnectOptions::from_str(url).map_err(|error| {
            let mut text = error.to_string().replace(url, "<redacted>");
            if let Some(password) = parsed.password().filter(|p| !p.is_empty()) {
                text = text.replace(password, "<redacted>");
            }
            text
        })?;
        Ok(options
            .application_name("hookline-dispatcher")
            .options([("search_path", self.schema.as_str())]))
    }
}

/// Whether `name` is a schema name used as is, unquoted: lower-case letters, digits, `_`.
pub(crate) fn postgres_schema_ok(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z' | '_'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && name.len() <= 63
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

    fn redis(url: &str) -> RedisSettings {
        RedisSettings {
            redis_url: url.to_owned(),
            ttl: Duration::from_secs(60),
            key_prefix: "hookline:delivered:".to_owned(),
            timeout: Duration::from_millis(200),
        }
    }

    #[test]
    fn passwords_never_show() {
        let settings = redis("redis://user:s3cret@cache.internal:6380/2");
        assert_eq!(
            settings.redacted_url(),
            "redis://user:***@cache.internal:6380/2"
        );
        assert!(!format!("{settings:?}").contains("s3cret"));
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }

    #[test]
    fn urls_are_checked_without_connecting() {
        assert!(redis("redis://127.0.0.1:6379/0").client().is_ok());
        let error = redis("http://:pw@127.0.0.1:6379")
            .client()
            .expect_err("not a Redis URL");
        assert!(!error.to_string().contains("pw@"), "{error}");
    }

    fn pg(url: &str) -> PgSettings {
        PgSettings {
            url: Secret::new(url),
            schema: "public".to_owned(),
            lease: Duration::from_secs(30),
            timeout: Duration::from_millis(300),
            retention: Duration::from_secs(3600),
            retention_batch: 100,
            retention_interval: Duration::from_secs(60),
            max_connections: 2,
        }
    }

    #[test]
    fn a_bad_url_is_refused_without_its_password() {
        for url in [
            "http://hookline:s3cretpw@db:5432/hookline",
            "postgres://hookline:s3cretpw@db:5432/hookline?sslmode=bogus",
            "not a url s3cretpw",
        ] {
            let reason = pg(url).connect_options().expect_err(url);
            assert!(!reason.contains("s3cretpw"), "{reason}");
        }
        assert!(
            pg("postgres://hookline:pw@127.0.0.1:5433/hookline")
                .connect_options()
                .is_ok()
        );
        assert!(!format!("{:?}", pg("postgres://u:s3cretpw@h/d")).contains("s3cretpw"));
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(postgres_schema_ok("hookline"));
        assert!(postgres_schema_ok("t_1"));
        assert!(!postgres_schema_ok("1x"));
        assert!(!postgres_schema_ok("a; DROP TABLE x"));
        assert!(!postgres_schema_ok("Upper"));
        assert!(!postgres_schema_ok(""));
    }

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
