//! The optional delivery ledger, which keeps a second copy of an event from being sent to
//! an endpoint again: Redis (`SET NX` with a TTL, checked first and cheap) and PostgreSQL (a
//! state table with leases and an audit trail, the record of truth), either or both. A
//! ledger that cannot answer never holds a webhook back: the copy is delivered and the
//! error counted.

mod postgres;
mod redis;
#[cfg(test)]
mod tests_pg;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::{DispatchError, LedgerError};
use crate::metrics::Metrics;
use crate::settings::Settings;

pub use postgres::Terminal;
pub(crate) use postgres::{Claim, PgLedger, upkeep};
pub(crate) use redis::RedisLedger;

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
