//! The relay's user-facing config (`[outbox]`) and the validated settings made from it.

use std::time::Duration;

use hookline_core::secret::Secret;
use serde::Deserialize;

use super::OutboxError;

/// The schema of the outbox table unless configured.
pub const DEFAULT_SCHEMA: &str = "public";

/// Whether `name` is a schema name used as is, unquoted: lower-case letters, digits, `_`,
/// not starting with a digit, at most 63 bytes.
pub fn schema_ok(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z' | '_'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && name.len() <= 63
}

/// The `[outbox]` section: where the table is and how the relay works.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct OutboxConfig {
    /// `postgres://user:password@host:port/database`, or `${env:NAME}` / `${file:PATH}`.
    pub postgres_url: Option<Secret>,
    /// The schema of the `hookline_outbox` table (made when missing by the migration).
    pub schema: String,
    /// Bring the table up to date when the relay starts.
    pub migrate: bool,
    /// Tasks claimed per statement.
    pub batch_size: u32,
    /// Publishes in flight at once within a batch.
    pub concurrency: u32,
    /// How long a claimed task is the relay's; a relay that dies holding tasks loses them
    /// to another after this. Must be longer than a batch's publish takes (the producer's
    /// `message.timeout.ms`, 30 s, bounds one publish).
    pub lease_ms: u64,
    /// How often the relay looks for tasks besides being woken by `NOTIFY`.
    pub poll_interval_ms: u64,
    /// Failed publishes of a task (the event refused) before it becomes `FAILED`.
    pub max_retries: u32,
    /// A task's wait after its first failed publish; doubles with each one.
    pub retry_base_ms: u64,
    /// The longest wait of a task between failed publishes.
    pub retry_max_ms: u64,
    /// The relay's first pause while Kafka (or PostgreSQL) is unreachable; doubles.
    pub backoff_base_ms: u64,
    /// The relay's longest pause while Kafka (or PostgreSQL) is unreachable.
    pub backoff_max_ms: u64,
    /// The most one statement may take, a connection included.
    pub statement_timeout_ms: u64,
    /// `COMPLETE` tasks are deleted this long after they were published.
    pub retention_ms: u64,
    /// Tasks deleted per statement by the retention.
    pub retention_batch: u32,
    /// How often the retention runs and the pending gauge is refreshed.
    pub maintenance_interval_ms: u64,
    /// Connections in the relay's pool.
    pub max_connections: u32,
    /// This relay's name in `claimed_by` (default: host, process id and a random suffix).
    pub relay_id: Option<String>,
}

impl Default for OutboxConfig {
    fn default() -> Self {
        OutboxConfig {
            postgres_url: None,
            schema: DEFAULT_SCHEMA.to_owned(),
            migrate: true,
            batch_size: 100,
            concurrency: 16,
            lease_ms: 120_000,
            poll_interval_ms: 1_000,
            max_retries: 5,
            retry_base_ms: 1_000,
            retry_max_ms: 300_000,
            backoff_base_ms: 500,
            backoff_max_ms: 30_000,
            statement_timeout_ms: 5_000,
            retention_ms: 24 * 3_600_000,
            retention_batch: 1_000,
            maintenance_interval_ms: 10_000,
            max_connections: 4,
            relay_id: None,
        }
    }
}

/// Where the table is and how to reach it.
#[derive(Clone, Debug)]
pub struct StoreSettings {
    /// The database URL (a secret).
    pub url: Secret,
    /// The table's schema, validated.
    pub schema: String,
    /// The most one statement may take.
    pub timeout: Duration,
    /// Connections in the pool.
    pub max_connections: u32,
}

/// Validated relay settings.
#[derive(Clone, Debug)]
pub struct RelaySettings {
    /// The table and the pool.
    pub store: StoreSettings,
    /// Migrate at start.
    pub migrate: bool,
    /// Tasks per claim.
    pub batch_size: u32,
    /// Publishes in flight.
    pub concurrency: usize,
    /// A claim's lease.
    pub lease: Duration,
    /// The poll interval.
    pub poll_interval: Duration,
    /// Failed publishes before `FAILED`.
    pub max_retries: u32,
    /// A task's first wait after a failed publish.
    pub retry_base: Duration,
    /// A task's longest wait.
    pub retry_max: Duration,
    /// The relay's first pause while Kafka or PostgreSQL is down.
    pub backoff_base: Duration,
    /// Its longest pause.
    pub backoff_max: Duration,
    /// How long `COMPLETE` tasks are kept.
    pub retention: Duration,
    /// Deleted per statement.
    pub retention_batch: u32,
    /// How often the retention and the gauge run.
    pub maintenance_interval: Duration,
    /// `claimed_by`.
    pub relay_id: String,
}

impl OutboxConfig {
    /// The store settings alone (for `status`, `retry`, `migrate`).
    pub fn store_settings(&self) -> Result<StoreSettings, OutboxError> {
        let url = self
            .postgres_url
            .clone()
            .ok_or_else(|| OutboxError::config("postgres_url", "is required"))?;
        if url.expose().trim().is_empty() {
            return Err(OutboxError::config("postgres_url", "must not be empty"));
        }
        if !schema_ok(&self.schema) {
            return Err(OutboxError::config(
                "schema",
                format!(
                    "{:?} must be lower-case letters, digits and `_` (at most 63)",
                    self.schema
                ),
            ));
        }
        positive("statement_timeout_ms", self.statement_timeout_ms)?;
        positive("max_connections", u64::from(self.max_connections))?;
        Ok(StoreSettings {
            url,
            schema: self.schema.clone(),
            timeout: Duration::from_millis(self.statement_timeout_ms),
            max_connections: self.max_connections,
        })
    }

    /// Validates everything into the relay's settings; the error names the field.
    pub fn into_settings(self) -> Result<RelaySettings, OutboxError> {
        let store = self.store_settings()?;
        positive("batch_size", u64::from(self.batch_size))?;
        positive("concurrency", u64::from(self.concurrency))?;
        positive("lease_ms", self.lease_ms)?;
        positive("poll_interval_ms", self.poll_interval_ms)?;
        positive("max_retries", u64::from(self.max_retries))?;
        positive("retry_base_ms", self.retry_base_ms)?;
        positive("backoff_base_ms", self.backoff_base_ms)?;
        positive("retention_batch", u64::from(self.retention_batch))?;
        positive("maintenance_interval_ms", self.maintenance_interval_ms)?;
        if self.retry_max_ms < self.retry_base_ms {
            return Err(OutboxError::config(
                "retry_max_ms",
                "must not be less than retry_base_ms",
            ));
        }
        if self.backoff_max_ms < self.backoff_base_ms {
            return Err(OutboxError::config(
                "backoff_max_ms",
                "must not be less than backoff_base_ms",
            ));
        }
        let relay_id = match self.relay_id {
            Some(id) if id.trim().is_empty() || id.len() > 200 => {
                return Err(OutboxError::config(
                    "relay_id",
                    "must be 1 to 200 characters",
                ));
            }
            Some(id) => id,
            None => default_relay_id(),
        };
        Ok(RelaySettings {
            store,
            migrate: self.migrate,
            batch_size: self.batch_size,
            concurrency: usize::try_from(self.concurrency).unwrap_or(usize::MAX),
            lease: Duration::from_millis(self.lease_ms),
            poll_interval: Duration::from_millis(self.poll_interval_ms),
            max_retries: self.max_retries,
            retry_base: Duration::from_millis(self.retry_base_ms),
            retry_max: Duration::from_millis(self.retry_max_ms),
            backoff_base: Duration::from_millis(self.backoff_base_ms),
            backoff_max: Duration::from_millis(self.backoff_max_ms),
            retention: Duration::from_millis(self.retention_ms),
            retention_batch: self.retention_batch,
            maintenance_interval: Duration::from_millis(self.maintenance_interval_ms),
            relay_id,
        })
    }
}

fn positive(field: &'static str, value: u64) -> Result<(), OutboxError> {
    if value == 0 {
        return Err(OutboxError::config(field, "must be greater than 0"));
    }
    Ok(())
}

fn default_relay_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "relay".to_owned());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}-{}", std::process::id(), &suffix[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_url() -> OutboxConfig {
        OutboxConfig {
            postgres_url: Some(Secret::new("postgres://u:pw-93kd@127.0.0.1/db")),
            ..OutboxConfig::default()
        }
    }

    #[test]
    fn defaults_are_valid_and_unknown_fields_refused() {
        let settings = with_url().into_settings().expect("valid");
        assert_eq!(settings.store.schema, "public");
        assert_eq!(settings.lease, Duration::from_secs(120));
        assert!(!settings.relay_id.is_empty());
        assert!(serde_json::from_str::<OutboxConfig>(r#"{"batch_sise": 1}"#).is_err());
    }

    #[test]
    fn errors_name_the_field_and_never_the_url() {
        let missing = OutboxConfig::default().into_settings().expect_err("no url");
        assert_eq!(missing.to_string(), "outbox.postgres_url: is required");
        let schema = OutboxConfig {
            schema: "Public; DROP".into(),
            ..with_url()
        };
        let error = schema.into_settings().expect_err("bad schema");
        assert!(error.to_string().starts_with("outbox.schema:"), "{error}");
        assert!(!error.to_string().contains("pw-93kd"));
        let zero = OutboxConfig {
            batch_size: 0,
            ..with_url()
        };
        let error = zero.into_settings().expect_err("zero batch");
        assert_eq!(
            error.to_string(),
            "outbox.batch_size: must be greater than 0"
        );
        let backwards = OutboxConfig {
            retry_max_ms: 10,
            retry_base_ms: 20,
            ..with_url()
        };
        let error = backwards.into_settings().expect_err("max below base");
        assert!(
            error.to_string().starts_with("outbox.retry_max_ms"),
            "{error}"
        );
        assert!(!format!("{:?}", with_url()).contains("pw-93kd"));
    }

    #[test]
    fn schema_names() {
        assert!(schema_ok("public"));
        assert!(schema_ok("t_outbox_1"));
        assert!(!schema_ok("1abc"));
        assert!(!schema_ok("a-b"));
        assert!(!schema_ok(""));
        assert!(!schema_ok(&"a".repeat(64)));
    }
}
