//! The PostgreSQL delivery ledger: a `webhook_deliveries` row per (endpoint, event) with its
//! lifecycle state and a lease, written with one `INSERT ... ON CONFLICT ... DO UPDATE ...
//! WHERE status NOT IN ('Succeeded','Rejected')` (the optimistic lock), and an append-only
//! `webhook_delivery_transitions` audit trail written by the same statements. A copy that
//! finds the delivery `Processing` under a live lease of another copy is put off; old rows
//! are removed after a retention period, in batches.

use std::time::Duration;

use hookline_core::pause::Pauses;
use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio_util::sync::CancellationToken;

use crate::error::{LedgerError, LedgerResult};
use crate::settings::PgSettings;

/// The ledger's tables (`crates/hookline-dispatcher/migrations`), built into the binary.
/// Other parts of hookline (the outbox, the receiver's store) may keep their tables in the
/// same database and schema, and so in the same `_sqlx_migrations` table, with versions of
/// their own: the ledger's migrator ignores the versions it does not know.
fn migrator() -> sqlx::migrate::Migrator {
    let mut migrator = sqlx::migrate!("./migrations");
    migrator.set_ignore_missing(true);
    migrator
}

/// How a delivery ended, as the ledger records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Terminal {
    /// The endpoint answered 2xx.
    Succeeded,
    /// An attempt failed and a retry was scheduled.
    Failed,
    /// Parked in the DLQ.
    Dlq,
}

impl Terminal {
    /// The `status` column's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Terminal::Succeeded => "Succeeded",
            Terminal::Failed => "Failed",
            Terminal::Dlq => "DLQ",
        }
    }
}

/// What a copy learns when it asks to deliver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The delivery is this copy's until the lease expires; the token names the lease.
    Claimed(String),
    /// The endpoint acknowledged the event already: not sent again.
    Succeeded,
    /// Another copy holds a live lease: put off for about `remaining`.
    Busy {
        /// Until the other lease expires.
        remaining: Duration,
    },
    /// No lease could be taken for another reason (a row that changed between the two
    /// statements, a `Rejected` row coming back as a redrive): delivered without one.
    Unclaimed,
}

/// The ledger: a pool that connects lazily, so a PostgreSQL that is down costs each
/// statement at most the timeout and delivery goes on.
#[derive(Clone, Debug)]
pub(crate) struct PgLedger {
    pool: PgPool,
    settings: PgSettings,
    owner: String,
}

impl PgLedger {
    /// The pool (no connection is made here).
    pub fn new(settings: &PgSettings, owner: &str) -> Result<PgLedger, String> {
        let options = settings.connect_options()?;
        let pool = PgPoolOptions::new()
            .max_connections(settings.max_connections)
            .acquire_timeout(settings.timeout)
            .connect_lazy_with(options);
        Ok(PgLedger {
            pool,
            settings: settings.clone(),
            owner: owner.to_owned(),
        })
    }

    /// Makes the schema and brings the tables up to date (sqlx's migrator holds an
    /// advisory lock, so replicas starting together do this once).
    pub async fn migrate(&self) -> LedgerResult<()> {
        let create = format!("CREATE SCHEMA IF NOT EXISTS {}", self.settings.schema);
        let result = self
            .bounded("migrate", sqlx::query(&create).execute(&self.pool))
            .await;
        if let Err(error) = result {
            // Two replicas creating the schema at once: one of them loses the race.
            let exists: LedgerResult<bool> = self
                .bounded(
                    "migrate",
                    sqlx::query_scalar(
                        "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
                    )
                    .bind(&self.settings.schema)
                    .fetch_one(&self.pool),
                )
                .await;
            if !matches!(exists, Ok(true)) {
                return Err(error);
            }
        }
        let after = self.settings.timeout.max(Duration::from_secs(10));
        let migrator = migrator();
        match tokio::time::timeout(after, migrator.run(&self.pool)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(LedgerError::Migrate { source }),
            Err(_) => Err(LedgerError::PostgresTimeout {
                op: "migrate",
                after,
            }),
        }
    }

    /// Takes the delivery for this copy (status `Processing`, a lease of its own), unless it
    /// succeeded already or another copy holds a live lease.
    pub async fn claim(&self, endpoint: &str, event_id: &str) -> LedgerResult<Claim> {
        let token = format!("{}/{:016x}", self.owner, rand::random::<u64>());
        let claimed: i64 = self
            .bounded(
                "claim",
                sqlx::query_scalar(CLAIM)
                    .bind(endpoint)
                    .bind(event_id)
                    .bind(&token)
                    .bind(self.settings.lease.as_secs_f64())
                    .bind(&self.owner)
                    .fetch_one(&self.pool),
            )
            .await?;
        if claimed > 0 {
            return Ok(Claim::Claimed(token));
        }
        let row: Option<(String, i64)> = self
            .bounded(
                "claim",
                sqlx::query_as(
                    "SELECT status, COALESCE(GREATEST(0, \
                       (EXTRACT(EPOCH FROM (lease_expires_at - now())) * 1000)::BIGINT), 0) \
                     FROM webhook_deliveries WHERE endpoint_id = $1 AND event_id = $2",
                )
                .bind(endpoint)
                .bind(event_id)
                .fetch_optional(&self.pool),
            )
            .await?;
        Ok(match row {
            Some((status, _)) if status == "Succeeded" => Claim::Succeeded,
            // The claim found the lease live; it may have run out since (remaining 0).
            Some((status, remaining_ms)) if status == "Processing" => Claim::Busy {
                remaining: Duration::from_millis(u64::try_from(remaining_ms).unwrap_or(0)),
            },
            Some(_) | None => Claim::Unclaimed,
        })
    }

    /// Records how the delivery ended and gives the lease up. `Succeeded` is recorded
    /// whoever holds a lease (the endpoint has the event); `Failed` and `DLQ` never take a
    /// live lease of another copy. `false`: the row was final already, or leased elsewhere.
    pub async fn finish(
        &self,
        endpoint: &str,
        event_id: &str,
        token: Option<&str>,
        terminal: Terminal,
        attempts: u32,
        last_status: Option<u16>,
    ) -> LedgerResult<bool> {
        let updated: i64 = self
            .bounded(
                "finish",
                sqlx::query_scalar(FINISH)
                    .bind(endpoint)
                    .bind(event_id)
                    .bind(terminal.as_str())
                    .bind(i32::try_from(attempts).unwrap_or(i32::MAX))
                    .bind(last_status.map(i32::from))
                    .bind(token)
                    .bind(&self.owner)
                    .fetch_one(&self.pool),
            )
            .await?;
        Ok(updated > 0)
    }

    /// Gives a lease up without an outcome (the copy was put off or stopped): the row stays
    /// `Processing` with its lease expired, so the next copy takes it at once.
    pub async fn release(&self, endpoint: &str, event_id: &str, token: &str) -> LedgerResult<()> {
        self.bounded(
            "release",
            sqlx::query(
                "UPDATE webhook_deliveries SET lease_expires_at = now(), updated_at = now() \
                 WHERE endpoint_id = $1 AND event_id = $2 AND status = 'Processing' \
                   AND lease_owner = $3",
            )
            .bind(endpoint)
            .bind(event_id)
            .bind(token)
            .execute(&self.pool),
        )
        .await?;
        Ok(())
    }

    /// Removes rows not updated for the retention period (and audit rows as old), a batch
    /// per statement until a batch comes back short. Returns how many rows went.
    pub async fn sweep(&self) -> LedgerResult<u64> {
        let mut removed = 0;
        for statement in [SWEEP_DELIVERIES, SWEEP_TRANSITIONS] {
            loop {
                let done = self
                    .bounded(
                        "retention",
                        sqlx::query(statement)
                            .bind(self.settings.retention.as_secs_f64())
                            .bind(i64::from(self.settings.retention_batch))
                            .execute(&self.pool),
                    )
                    .await?
                    .rows_affected();
                removed += done;
                if done < u64::from(self.settings.retention_batch) {
                    break;
                }
            }
        }
        Ok(removed)
    }

    async fn bounded<T>(
        &self,
        op: &'static str,
        call: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> LedgerResult<T> {
        let after = self.settings.timeout;
        match tokio::time::timeout(after, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(source)) => Err(LedgerError::Postgres { op, source }),
            Err(_) => Err(LedgerError::PostgresTimeout { op, after }),
        }
    }
}

/// The ledger's upkeep, until `shutdown`: the migrations (again and again, with a growing
/// pause, while PostgreSQL is unreachable), then the retention every interval. Errors are
/// handed to `on_error` (the metrics) and logged.
pub(crate) async fn upkeep(
    ledger: PgLedger,
    migrated: bool,
    on_error: impl Fn(&LedgerError) + Send,
    shutdown: CancellationToken,
) {
    let mut pauses = Pauses::new(Duration::from_secs(1), Duration::from_secs(60));
    if !migrated {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(pauses.next_pause()) => {}
            }
            match ledger.migrate().await {
                Ok(()) => {
                    tracing::info!("delivery ledger (postgres): tables ready");
                    break;
                }
                Err(error) => {
                    on_error(&error);
                    tracing::warn!(%error, "delivery ledger (postgres): tables not ready yet");
                }
            }
        }
    }
    loop {
        match ledger.sweep().await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "delivery ledger (postgres): old rows removed"),
            Err(error) => {
                on_error(&error);
                tracing::warn!(%error, "delivery ledger (postgres): retention failed");
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(ledger.settings.retention_interval) => {}
        }
    }
}

/// $1 endpoint, $2 event, $3 lease token, $4 lease in seconds, $5 dispatcher id. Counts the rows claimed (0
/// or 1); the audit row is written by the same statement. `prev` is read in the
/// statement's snapshot (the row as it was before).
const CLAIM: &str = "
WITH prev AS (
    SELECT status FROM webhook_deliveries WHERE endpoint_id = $1 AND event_id = $2
), up AS (
    INSERT INTO webhook_deliveries AS d
        (endpoint_id, event_id, status, lease_owner, lease_expires_at)
    VALUES ($1, $2, 'Processing', $3, now() + make_interval(secs => $4))
    ON CONFLICT (endpoint_id, event_id) DO UPDATE
    SET status = 'Processing', lease_owner = EXCLUDED.lease_owner,
        lease_expires_at = EXCLUDED.lease_expires_at, updated_at = now()
    WHERE d.status NOT IN ('Succeeded', 'Rejected')
      AND NOT (d.status = 'Processing' AND d.lease_expires_at > now())
    RETURNING d.attempts, d.last_status, (d.xmax = 0) AS inserted
), audit AS (
    INSERT INTO webhook_delivery_transitions
        (endpoint_id, event_id, from_status, to_status, attempts, last_status, dispatcher_id)
    SELECT $1, $2, CASE WHEN up.inserted THEN 'Received' ELSE (SELECT status FROM prev) END,
           'Processing', up.attempts, up.last_status, $5
    FROM up
)
SELECT count(*) FROM up";

/// $1 endpoint, $2 event, $3 status, $4 attempts, $5 last HTTP status, $6 lease token (or
/// NULL: the claim failed), $7 dispatcher id.
const FINISH: &str = "
WITH prev AS (
    SELECT status FROM webhook_deliveries WHERE endpoint_id = $1 AND event_id = $2
), up AS (
    INSERT INTO webhook_deliveries AS d
        (endpoint_id, event_id, status, attempts, last_status)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (endpoint_id, event_id) DO UPDATE
    SET status = EXCLUDED.status, attempts = GREATEST(d.attempts, EXCLUDED.attempts),
        last_status = COALESCE(EXCLUDED.last_status, d.last_status),
        lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE d.status NOT IN ('Succeeded', 'Rejected')
      AND (EXCLUDED.status = 'Succeeded' OR d.lease_owner IS NULL
           OR d.lease_owner = $6 OR d.lease_expires_at <= now())
    RETURNING d.attempts, d.last_status, (d.xmax = 0) AS inserted
), audit AS (
    INSERT INTO webhook_delivery_transitions
        (endpoint_id, event_id, from_status, to_status, attempts, last_status, dispatcher_id)
    SELECT $1, $2, CASE WHEN up.inserted THEN 'Received' ELSE (SELECT status FROM prev) END,
           $3, up.attempts, up.last_status, $7
    FROM up
)
SELECT count(*) FROM up";

const SWEEP_DELIVERIES: &str = "
DELETE FROM webhook_deliveries WHERE ctid IN (
    SELECT ctid FROM webhook_deliveries
    WHERE updated_at < now() - make_interval(secs => $1) LIMIT $2)";

const SWEEP_TRANSITIONS: &str = "
DELETE FROM webhook_delivery_transitions WHERE id IN (
    SELECT id FROM webhook_delivery_transitions
    WHERE at < now() - make_interval(secs => $1) LIMIT $2)";
