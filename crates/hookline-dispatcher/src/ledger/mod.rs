//! The optional delivery ledger, which keeps a second copy of an event from being sent to
//! an endpoint again: Redis (`SET NX` with a TTL, checked first and cheap) and PostgreSQL (a
//! state table with leases and an audit trail, the record of truth), either or both. A
//! ledger that cannot answer never holds a webhook back: the copy is delivered and the
//! error counted.

mod postgres;
mod redis;
#[cfg(test)]
mod tests_pg;

use std::time::Duration;

use ::redis::RedisError;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::DispatchError;
use crate::metrics::Metrics;
use crate::settings::Settings;

pub(crate) use postgres::{Claim, PgLedger, postgres_schema_ok, upkeep};
pub use postgres::{PgSettings, Terminal};
pub(crate) use redis::RedisLedger;
pub use redis::RedisSettings;

/// A `Result` with [`LedgerError`].
pub type LedgerResult<T> = std::result::Result<T, LedgerError>;

/// Why the ledger could not answer.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The ledger's URL is not a Redis URL.
    #[error("{url} is not a Redis URL: {source}")]
    BadUrl {
        /// The URL, password hidden.
        url: String,
        /// The client's parse error.
        #[source]
        source: RedisError,
    },
    /// Redis answered a command with an error, or the connection failed.
    #[error("redis {op} failed: {source}")]
    Redis {
        /// The command.
        op: &'static str,
        /// The client's error.
        #[source]
        source: RedisError,
    },
    /// Redis did not answer in time.
    #[error("redis {op} got no answer within {after:?}")]
    Timeout {
        /// The command.
        op: &'static str,
        /// The configured timeout.
        after: Duration,
    },
    /// Redis answered, but not what the command answers.
    #[error("redis {op} answered {answer:?}")]
    Unexpected {
        /// The command.
        op: &'static str,
        /// What it answered.
        answer: String,
    },
    /// A PostgreSQL statement failed, or no connection could be had.
    #[error("postgres {op} failed: {source}")]
    Postgres {
        /// The step (`claim`, `finish`, `release`, `retention`, `connect`).
        op: &'static str,
        /// The client's error (it never holds the URL).
        #[source]
        source: sqlx::Error,
    },
    /// PostgreSQL did not answer in time.
    #[error("postgres {op} got no answer within {after:?}")]
    PostgresTimeout {
        /// The step.
        op: &'static str,
        /// The configured timeout.
        after: Duration,
    },
    /// The ledger's tables could not be created or brought up to date.
    #[error("postgres migrations failed: {source}")]
    Migrate {
        /// The migrator's error.
        #[source]
        source: sqlx::migrate::MigrateError,
    },
}

impl LedgerError {
    /// The failing command, a low-cardinality label.
    pub fn op(&self) -> &'static str {
        match self {
            LedgerError::BadUrl { .. } => "connect",
            LedgerError::Migrate { .. } => "migrate",
            LedgerError::Redis { op, .. }
            | LedgerError::Timeout { op, .. }
            | LedgerError::Unexpected { op, .. }
            | LedgerError::Postgres { op, .. }
            | LedgerError::PostgresTimeout { op, .. } => op,
        }
    }

    /// The store that failed, a label: `redis` or `postgres`.
    pub fn store(&self) -> &'static str {
        match self {
            LedgerError::BadUrl { .. }
            | LedgerError::Redis { .. }
            | LedgerError::Timeout { .. }
            | LedgerError::Unexpected { .. } => "redis",
            LedgerError::Postgres { .. }
            | LedgerError::PostgresTimeout { .. }
            | LedgerError::Migrate { .. } => "postgres",
        }
    }
}

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

/// The configured ledgers. Redis is asked first: a key there settles it. PostgreSQL holds
/// the state of every delivery, leases included.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ledger {
    pub redis: Option<RedisLedger>,
    pub postgres: Option<PgLedger>,
    /// The dispatcher's tasks: a lease given back after its delivery was stopped is given
    /// back by one of them, which the dispatcher's stop waits for.
    pub tasks: TaskTracker,
}

/// Reaches the configured ledgers. Redis must answer a PING (start-up fails otherwise).
/// PostgreSQL need not: its tables are made now when it answers, else by the upkeep task,
/// which also runs the retention until `shutdown`.
pub(crate) async fn start(
    settings: &Settings,
    metrics: &Metrics,
    tracker: &TaskTracker,
    shutdown: &CancellationToken,
) -> Result<Option<Ledger>, DispatchError> {
    let Some(ledger_settings) = &settings.ledger else {
        return Ok(None);
    };
    let owner = settings.dispatcher_id.as_str();
    let redis = match &ledger_settings.redis {
        Some(redis_settings) => {
            let ledger = RedisLedger::connect(redis_settings, owner)
                .await
                .map_err(|source| DispatchError::Ledger {
                    url: redis_settings.redacted_url(),
                    source,
                })?;
            tracing::info!(
                redis = redis_settings.redacted_url(),
                ttl_s = redis_settings.ttl.as_secs(),
                "delivery ledger reachable"
            );
            Some(ledger)
        }
        None => None,
    };
    let postgres = match &ledger_settings.postgres {
        Some(pg_settings) => {
            let ledger = PgLedger::new(pg_settings, owner)
                .map_err(|reason| DispatchError::config("ledger.postgres_url", reason))?;
            let migrated = match ledger.migrate().await {
                Ok(()) => {
                    tracing::info!(
                        schema = pg_settings.schema,
                        lease_ms = pg_settings.lease.as_millis(),
                        "delivery ledger (postgres) reachable, tables ready"
                    );
                    true
                }
                Err(error) => {
                    metrics.ledger_error(error.store(), error.op());
                    tracing::warn!(
                        %error,
                        "delivery ledger (postgres) not reachable; delivering without it until it is"
                    );
                    false
                }
            };
            let metrics = metrics.clone();
            tracker.spawn(upkeep(
                ledger.clone(),
                migrated,
                move |error: &LedgerError| metrics.ledger_error(error.store(), error.op()),
                shutdown.clone(),
            ));
            Some(ledger)
        }
        None => None,
    };
    Ok(Some(Ledger {
        redis,
        postgres,
        tasks: tracker.clone(),
    }))
}
