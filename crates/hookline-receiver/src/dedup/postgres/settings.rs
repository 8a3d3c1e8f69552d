//! Where the PostgreSQL store connects, how it names its rows, and how it purges them.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use hookline_core::secret::Secret;
use sqlx::postgres::PgConnectOptions;

use crate::dedup::StoreError;

/// The PostgreSQL store's settings; [`PgStoreSettings::new`] gives the defaults.
#[derive(Clone)]
pub struct PgStoreSettings {
    /// `postgres://user:password@host:port/database` (a secret: it may hold a password;
    /// never shown).
    pub url: Secret,
    /// The schema of the tables (`public` by default; made when missing).
    pub schema: String,
    /// This receiver's name: the rows of several receivers sharing one table are told
    /// apart by it (`default` by default).
    pub receiver: String,
    /// The most one statement may take, a connection included (2 s by default).
    pub timeout: Duration,
    /// Connections in the pool (4 by default).
    pub max_connections: u32,
    /// How often the background purge removes expired rows (every 60 s by default);
    /// `None`: no background task, the application calls `PgStore::purge_expired`.
    pub purge_interval: Option<Duration>,
    /// Rows removed per statement of the purge (1,000 by default).
    pub purge_batch: u32,
    /// How long the audit trail keeps a transition (7 days by default).
    pub audit_retention: Duration,
}

impl PgStoreSettings {
    /// Settings for `url` with the defaults.
    pub fn new(url: Secret) -> Self {
        PgStoreSettings {
            url,
            schema: "public".to_owned(),
            receiver: "default".to_owned(),
            timeout: Duration::from_secs(2),
            max_connections: 4,
            purge_interval: Some(Duration::from_secs(60)),
            purge_batch: 1_000,
            audit_retention: Duration::from_secs(7 * 24 * 60 * 60),
        }
    }

    /// The URL with its user and password hidden.
    pub fn redacted_url(&self) -> String {
        hookline_core::url_guard::redact_url(self.url.expose())
    }

    /// Checks the settings; the error names the field, never the URL's password.
    pub(crate) fn validate(&self) -> Result<(), StoreError> {
        let invalid = |field, reason: &str| {
            Err(StoreError::PgSettings {
                field,
                reason: reason.to_owned(),
            })
        };
        if !schema_ok(&self.schema) {
            return invalid(
                "schema",
                "must be a plain identifier (a-z, 0-9, _, at most 63)",
            );
        }
        if self.receiver.is_empty() || self.receiver.len() > 200 {
            return invalid("receiver", "must have 1 to 200 bytes");
        }
        if self.timeout.is_zero() {
            return invalid("timeout", "must be more than zero");
        }
        if self.max_connections == 0 {
            return invalid("max_connections", "must be at least 1");
        }
        if self.purge_batch == 0 {
            return invalid("purge_batch", "must be at least 1");
        }
        if self.purge_interval.is_some_and(|every| every.is_zero()) {
            return invalid("purge_interval", "must be more than zero");
        }
        Ok(())
    }

    /// The client's options from the URL, with the schema as the search path. The reason
    /// of a failure never holds the URL or its password.
    pub(crate) fn connect_options(&self) -> Result<PgConnectOptions, StoreError> {
        let url = self.url.expose();
        let invalid = |reason: String| StoreError::PgSettings {
            field: "url",
            reason,
        };
        let parsed =
            url::Url::parse(url).map_err(|error| invalid(format!("is not a URL: {error}")))?;
        if !matches!(parsed.scheme(), "postgres" | "postgresql") {
            return Err(invalid("is not a postgres:// URL".to_owned()));
        }
        let options = PgConnectOptions::from_str(url).map_err(|error| {
            let mut text = error.to_string().replace(url, "<redacted>");
            if let Some(password) = parsed.password().filter(|p| !p.is_empty()) {
                text = text.replace(password, "<redacted>");
            }
            invalid(format!("cannot be used: {text}"))
        })?;
        Ok(options
            .application_name("hookline-receiver")
            .options([("search_path", self.schema.as_str())]))
    }
}

impl fmt::Debug for PgStoreSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStoreSettings")
            .field("url", &self.redacted_url())
            .field("schema", &self.schema)
            .field("receiver", &self.receiver)
            .field("timeout", &self.timeout)
            .field("max_connections", &self.max_connections)
            .field("purge_interval", &self.purge_interval)
            .field("purge_batch", &self.purge_batch)
            .field("audit_retention", &self.audit_retention)
            .finish()
    }
}

/// Whether `name` is a schema name used as is, unquoted: lower-case letters, digits, `_`.
fn schema_ok(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z' | '_'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && name.len() <= 63
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_url_is_refused_without_its_password() {
        for url in [
            "http://hookline:s3cretpw@db:5432/hookline",
            "postgres://hookline:s3cretpw@db:5432/hookline?sslmode=bogus",
            "not a url s3cretpw",
        ] {
            let error = PgStoreSettings::new(Secret::new(url))
                .connect_options()
                .expect_err(url)
                .to_string();
            assert!(error.starts_with("postgres store: url "), "{error}");
            assert!(!error.contains("s3cretpw"), "{error}");
        }
        let fine = PgStoreSettings::new(Secret::new("postgres://u:s3cretpw@127.0.0.1:5433/d"));
        assert!(fine.connect_options().is_ok());
        assert!(fine.validate().is_ok());
        assert!(!format!("{fine:?}").contains("s3cretpw"));
    }

    #[test]
    fn settings_errors_name_the_field() {
        let base = PgStoreSettings::new(Secret::new("postgres://u@h/d"));
        type Breaks = fn(&mut PgStoreSettings);
        let cases: [(&str, Breaks); 5] = [
            ("schema", |s| s.schema = "a; DROP TABLE x".to_owned()),
            ("receiver", |s| s.receiver = String::new()),
            ("timeout", |s| s.timeout = Duration::ZERO),
            ("purge_batch", |s| s.purge_batch = 0),
            ("purge_interval", |s| {
                s.purge_interval = Some(Duration::ZERO)
            }),
        ];
        for (field, break_it) in cases {
            let mut settings = base.clone();
            break_it(&mut settings);
            let error = settings.validate().expect_err(field).to_string();
            assert!(
                error.starts_with(&format!("postgres store: {field} ")),
                "{error}"
            );
        }
        assert!(schema_ok("t_1"));
        assert!(!schema_ok("Upper"));
        assert!(!schema_ok("1x"));
    }
}
