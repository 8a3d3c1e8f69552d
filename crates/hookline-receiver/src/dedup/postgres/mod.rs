//! The PostgreSQL [`DedupStore`]: a `hookline_received` row per (receiver, webhook id) with
//! its state (`Processing`, `Succeeded`, `Failed`), attempts, first and last seen, and a
//! processing lease (`lease_owner`, `lease_until`); claimed with one `INSERT ... ON CONFLICT
//! ... DO UPDATE ... WHERE` (the optimistic lock: the row count tells whether this copy
//! won), marked succeeded or released only by the lease's owner, and audited in the
//! append-only `hookline_received_transitions`. Rows past the dedup TTL are removed in
//! batches by a background task (or [`PgStore::purge_expired`]).

mod settings;
mod sql;

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::{Claim, ClaimToken, DedupStore, Settle, StoreError};
pub use settings::PgStoreSettings;

/// The store's tables (`crates/hookline-receiver/migrations`), built in. Other parts of
/// hookline (the delivery ledger, the outbox) may keep theirs in the same schema and so in
/// the same `_sqlx_migrations`: versions this crate does not know are ignored.
fn migrator() -> sqlx::migrate::Migrator {
    let mut migrator = sqlx::migrate!("./migrations");
    migrator.set_ignore_missing(true);
    migrator
}

/// A pool of connections, every statement bounded by the timeout, so an unreachable
/// PostgreSQL costs a request at most about that long (and the layer answers 503, or
/// processes, as configured). Clones share the pool; the background purge stops when the
/// last clone is dropped.
#[derive(Clone, Debug)]
pub struct PgStore {
    inner: Arc<Inner>,
    _purge: Option<Arc<DropGuard>>,
}

#[derive(Debug)]
struct Inner {
    pool: PgPool,
    settings: PgStoreSettings,
}

impl PgStore {
    /// Connects, makes the schema and the tables when missing (sqlx's migrator holds an
    /// advisory lock, so replicas starting together do this once), and starts the
    /// background purge unless `purge_interval` is `None`. Needs a Tokio runtime.
    pub async fn connect(settings: PgStoreSettings) -> Result<PgStore, StoreError> {
        settings.validate()?;
        let options = settings.connect_options()?;
        let pool = PgPoolOptions::new()
            .max_connections(settings.max_connections)
            .acquire_timeout(settings.timeout)
            .connect_lazy_with(options);
        let inner = Arc::new(Inner { pool, settings });
        inner.migrate().await?;
        let purge = inner.settings.purge_interval.map(|every| {
            let stop = CancellationToken::new();
            tokio::spawn(purge_loop(inner.clone(), every, stop.clone()));
            Arc::new(stop.drop_guard())
        });
        Ok(PgStore {
            inner,
            _purge: purge,
        })
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &PgStoreSettings {
        &self.inner.settings
    }

    /// Removes the rows past their dedup TTL (every receiver's in the table) and the audit
    /// rows older than `audit_retention`, a batch per statement until a batch comes back
    /// short. Returns how many rows went. The background task calls it every
    /// `purge_interval`.
    pub async fn purge_expired(&self) -> Result<u64, StoreError> {
        self.inner.purge().await
    }
}

impl Inner {
    async fn migrate(&self) -> Result<(), StoreError> {
        let schema = &self.settings.schema;
        if schema != "public" {
            let create = format!("CREATE SCHEMA IF NOT EXISTS {schema}");
            let made = self
                .bounded("migrate", sqlx::query(&create).execute(&self.pool))
                .await;
            if let Err(error) = made {
                // Two replicas creating the schema at once: one of them loses the race.
                let exists: Result<bool, StoreError> = self
                    .bounded(
                        "migrate",
                        sqlx::query_scalar(
                            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
                        )
                        .bind(schema)
                        .fetch_one(&self.pool),
                    )
                    .await;
                if !matches!(exists, Ok(true)) {
                    return Err(error);
                }
            }
        }
        let after = self.settings.timeout.max(Duration::from_secs(10));
        match tokio::time::timeout(after, migrator().run(&self.pool)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(StoreError::Migrate { source }),
            Err(_) => Err(StoreError::PgTimeout {
                op: "migrate",
                after,
            }),
        }
    }

    async fn purge(&self) -> Result<u64, StoreError> {
        let batch = i64::from(self.settings.purge_batch);
        let mut removed = 0;
        let retention = self.settings.audit_retention.as_secs_f64();
        for (statement, retention) in [
            (sql::PURGE_RECEIVED, None),
            (sql::PURGE_TRANSITIONS, Some(retention)),
        ] {
            loop {
                let mut query = sqlx::query(statement).bind(batch);
                if let Some(retention) = retention {
                    query = query.bind(retention);
                }
                let done = self
                    .bounded("purge", query.execute(&self.pool))
                    .await?
                    .rows_affected();
                removed += done;
                if done < u64::from(self.settings.purge_batch) {
                    break;
                }
            }
        }
        Ok(removed)
    }

    /// Runs a statement that counts the rows it changed.
    async fn count(
        &self,
        op: &'static str,
        statement: &'static str,
        id: &str,
        token: &ClaimToken,
        secs: Option<f64>,
    ) -> Result<i64, StoreError> {
        let mut query = sqlx::query_scalar(statement)
            .bind(&self.settings.receiver)
            .bind(id)
            .bind(token.as_str());
        if let Some(secs) = secs {
            query = query.bind(secs);
        }
        self.bounded(op, query.fetch_one(&self.pool)).await
    }

    async fn bounded<T>(
        &self,
        op: &'static str,
        call: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, StoreError> {
        let after = self.settings.timeout;
        match tokio::time::timeout(after, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(source)) => Err(StoreError::Postgres { op, source }),
            Err(_) => Err(StoreError::PgTimeout { op, after }),
        }
    }
}

impl DedupStore for PgStore {
    async fn claim(&self, id: &str, lease: Duration, ttl: Duration) -> Result<Claim, StoreError> {
        let inner = &self.inner;
        // A second round only when the row changed between the two statements (released,
        // or its lease ran out, just then).
        for _ in 0..2 {
            let token = ClaimToken::random();
            let won: i64 = inner
                .bounded(
                    "claim",
                    sqlx::query_scalar(sql::CLAIM)
                        .bind(&inner.settings.receiver)
                        .bind(id)
                        .bind(token.as_str())
                        .bind(lease.as_secs_f64())
                        .bind(ttl.as_secs_f64())
                        .fetch_one(&inner.pool),
                )
                .await?;
            if won > 0 {
                return Ok(Claim::Claimed(token));
            }
            let found: Option<(String, bool, bool)> = inner
                .bounded(
                    "claim",
                    sqlx::query_as(sql::FOUND)
                        .bind(&inner.settings.receiver)
                        .bind(id)
                        .fetch_optional(&inner.pool),
                )
                .await?;
            match found {
                Some((status, _, true)) if status == "Succeeded" => return Ok(Claim::Succeeded),
                Some((status, true, true)) if status == "Processing" => {
                    return Ok(Claim::Processing);
                }
                Some(_) | None => {}
            }
        }
        // Still changing under us: another copy is at it; the sender retries the 409.
        Ok(Claim::Processing)
    }

    async fn succeed(
        &self,
        id: &str,
        token: &ClaimToken,
        ttl: Duration,
    ) -> Result<Settle, StoreError> {
        let changed = self
            .inner
            .count("succeed", sql::SUCCEED, id, token, Some(ttl.as_secs_f64()))
            .await?;
        Ok(settled(changed))
    }

    async fn release(&self, id: &str, token: &ClaimToken) -> Result<Settle, StoreError> {
        let changed = self
            .inner
            .count("release", sql::RELEASE, id, token, None)
            .await?;
        Ok(settled(changed))
    }
}

fn settled(changed: i64) -> Settle {
    if changed > 0 {
        Settle::Recorded
    } else {
        Settle::Superseded
    }
}

/// The background purge, every `every` until `stop` (the last store dropped).
async fn purge_loop(inner: Arc<Inner>, every: Duration, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            purged = inner.purge() => match purged {
                Ok(0) => {}
                Ok(removed) => tracing::info!(removed, "receiver dedup store (postgres): expired rows removed"),
                Err(error) => tracing::warn!(op = error.op(), %error, "receiver dedup store (postgres): purge failed"),
            },
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}
