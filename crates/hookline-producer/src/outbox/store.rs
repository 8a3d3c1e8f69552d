//! The outbox table's statements, each bounded by the timeout: migrate, claim, complete,
//! release, fail, the retention, the status and the retry of failed tasks.

use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::status::OutboxStatus;
use super::task::Task;
use super::{OutboxError, StoreSettings};

/// The channel the insert trigger notifies, with the table's schema as payload.
pub const NOTIFY_CHANNEL: &str = "hookline_outbox";

/// The outbox table's migrations; other parts of hookline keep theirs in the same
/// `_sqlx_migrations`, so versions this one does not know are ignored.
fn migrator() -> sqlx::migrate::Migrator {
    let mut migrator = sqlx::migrate!("./migrations");
    migrator.set_ignore_missing(true);
    migrator
}

const TASK_COLUMNS: &str = "id::text AS id, aggregatetype, aggregateid, type, \
    payload::text AS payload, content_type, headers::text AS headers, tenant_id, channels, \
    endpoint_url, (EXTRACT(EPOCH FROM created_ts) * 1000)::bigint AS created_ms, \
    (EXTRACT(EPOCH FROM expires_at) * 1000)::bigint AS expires_ms, retry_count";

/// The outbox table of one schema, through a pool that connects lazily (a PostgreSQL that
/// is down costs each statement at most the timeout).
#[derive(Clone, Debug)]
pub struct OutboxStore {
    pool: PgPool,
    schema: String,
    timeout: Duration,
}

impl OutboxStore {
    /// The pool (no connection is made here). The error never holds the URL.
    pub fn new(settings: &StoreSettings) -> Result<OutboxStore, OutboxError> {
        let options = connect_options(settings)?;
        let pool = PgPoolOptions::new()
            .max_connections(settings.max_connections)
            .acquire_timeout(settings.timeout)
            .connect_lazy_with(options);
        Ok(OutboxStore {
            pool,
            schema: settings.schema.clone(),
            timeout: settings.timeout,
        })
    }

    /// The pool, for the listener.
    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The table's schema.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Makes the schema when missing and brings the table up to date (sqlx's migrator
    /// holds an advisory lock, so relays starting together do this once).
    pub async fn migrate(&self) -> Result<(), OutboxError> {
        let create = format!("CREATE SCHEMA IF NOT EXISTS {}", self.schema);
        if let Err(error) = self
            .bounded("migrate", sqlx::query(&create).execute(&self.pool))
            .await
        {
            // Two relays creating the schema at once: one of them loses the race.
            let exists: Result<bool, _> = self
                .bounded(
                    "migrate",
                    sqlx::query_scalar(
                        "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
                    )
                    .bind(&self.schema)
                    .fetch_one(&self.pool),
                )
                .await;
            if !matches!(exists, Ok(true)) {
                return Err(error);
            }
        }
        let after = self.timeout.max(Duration::from_secs(10));
        match tokio::time::timeout(after, migrator().run(&self.pool)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(OutboxError::Migrate(source)),
            Err(_) => Err(OutboxError::Timeout {
                op: "migrate",
                after,
            }),
        }
    }

    /// Claims up to `limit` tasks for `owner` until `lease` from now: waiting tasks whose
    /// backoff passed, and tasks whose lease expired (their relay died), oldest first.
    /// Rows another relay is claiming are skipped (`FOR UPDATE SKIP LOCKED`).
    pub(crate) async fn claim(
        &self,
        owner: &str,
        lease: Duration,
        limit: u32,
    ) -> Result<Vec<Task>, OutboxError> {
        let statement = format!(
            "UPDATE hookline_outbox SET status = 'WIP', claimed_by = $1, \
               claimed_until = now() + make_interval(secs => $2) \
             WHERE id IN (SELECT id FROM hookline_outbox \
               WHERE (status = 'NOT_CALLED' AND (next_retry_ts IS NULL OR next_retry_ts <= now())) \
                  OR (status = 'WIP' AND claimed_until < now()) \
               ORDER BY created_ts LIMIT $3 FOR UPDATE SKIP LOCKED) \
             RETURNING {TASK_COLUMNS}"
        );
        let mut tasks: Vec<Task> = self
            .bounded(
                "claim",
                sqlx::query_as(&statement)
                    .bind(owner)
                    .bind(lease.as_secs_f64())
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool),
            )
            .await?;
        tasks.sort_by_key(|task| task.created_ms);
        Ok(tasks)
    }

    /// Marks published tasks `COMPLETE` (whoever holds them now: they are on Kafka).
    pub(crate) async fn complete(&self, ids: &[String]) -> Result<u64, OutboxError> {
        let done = self
            .bounded(
                "complete",
                sqlx::query(
                    "UPDATE hookline_outbox SET status = 'COMPLETE', completed_ts = now(), \
                       claimed_by = NULL, claimed_until = NULL \
                     WHERE id = ANY($1::uuid[]) AND status <> 'COMPLETE'",
                )
                .bind(ids)
                .execute(&self.pool),
            )
            .await?;
        Ok(done.rows_affected())
    }

    /// Gives tasks back without counting a retry (Kafka was unreachable).
    pub(crate) async fn release(&self, owner: &str, ids: &[String]) -> Result<(), OutboxError> {
        self.bounded(
            "release",
            sqlx::query(
                "UPDATE hookline_outbox SET status = 'NOT_CALLED', claimed_by = NULL, \
                   claimed_until = NULL \
                 WHERE id = ANY($1::uuid[]) AND status = 'WIP' AND claimed_by = $2",
            )
            .bind(ids)
            .bind(owner)
            .execute(&self.pool),
        )
        .await?;
        Ok(())
    }

    /// Records a refused publish: `retry_count + 1`, the error, and back to `NOT_CALLED`
    /// until `backoff` passed, or `FAILED` once `retry_count` reaches `max_retries`.
    /// Returns whether the task is now `FAILED`.
    pub(crate) async fn fail(
        &self,
        owner: &str,
        id: &str,
        error: &str,
        max_retries: u32,
        backoff: Duration,
    ) -> Result<bool, OutboxError> {
        let failed: Option<bool> = self
            .bounded(
                "fail",
                sqlx::query_scalar(
                    "UPDATE hookline_outbox SET retry_count = retry_count + 1, last_error = $3, \
                       last_retry_ts = now(), \
                       status = CASE WHEN retry_count + 1 >= $4 THEN 'FAILED' ELSE 'NOT_CALLED' END, \
                       next_retry_ts = now() + make_interval(secs => $5), \
                       claimed_by = NULL, claimed_until = NULL \
                     WHERE id = $1::uuid AND status = 'WIP' AND claimed_by = $2 \
                     RETURNING status = 'FAILED'",
                )
                .bind(id)
                .bind(owner)
                .bind(error)
                .bind(i64::from(max_retries))
                .bind(backoff.as_secs_f64())
                .fetch_optional(&self.pool),
            )
            .await?;
        Ok(failed.unwrap_or(false))
    }

    /// Tasks not yet published (`NOT_CALLED` or `WIP`).
    pub async fn pending(&self) -> Result<i64, OutboxError> {
        self.bounded(
            "pending",
            sqlx::query_scalar(
                "SELECT count(*) FROM hookline_outbox WHERE status IN ('NOT_CALLED', 'WIP')",
            )
            .fetch_one(&self.pool),
        )
        .await
    }

    /// Deletes up to `batch` tasks published more than `retention` ago; returns how many.
    pub async fn delete_completed(
        &self,
        retention: Duration,
        batch: u32,
    ) -> Result<u64, OutboxError> {
        let deleted = self
            .bounded(
                "retention",
                sqlx::query(
                    "DELETE FROM hookline_outbox WHERE id IN (SELECT id FROM hookline_outbox \
                       WHERE status = 'COMPLETE' AND completed_ts < now() - make_interval(secs => $1) \
                       LIMIT $2 FOR UPDATE SKIP LOCKED)",
                )
                .bind(retention.as_secs_f64())
                .bind(i64::from(batch))
                .execute(&self.pool),
            )
            .await?;
        Ok(deleted.rows_affected())
    }

    /// Counts by state, the oldest pending age and up to `failed_limit` failed tasks.
    pub async fn status(&self, failed_limit: u32) -> Result<OutboxStatus, OutboxError> {
        let counts: Vec<(String, i64)> = self
            .bounded(
                "status",
                sqlx::query_as("SELECT status, count(*) FROM hookline_outbox GROUP BY status")
                    .fetch_all(&self.pool),
            )
            .await?;
        let mut status = OutboxStatus::default();
        for (state, count) in counts {
            match state.as_str() {
                "NOT_CALLED" => status.not_called = count,
                "WIP" => status.wip = count,
                "COMPLETE" => status.complete = count,
                "FAILED" => status.failed = count,
                _ => {}
            }
        }
        status.oldest_pending_age_s = self
            .bounded(
                "status",
                sqlx::query_scalar(
                    "SELECT EXTRACT(EPOCH FROM now() - min(created_ts))::float8 \
                     FROM hookline_outbox WHERE status IN ('NOT_CALLED', 'WIP')",
                )
                .fetch_one(&self.pool),
            )
            .await?;
        status.failed_tasks = self
            .bounded(
                "status",
                sqlx::query_as(
                    "SELECT id::text AS id, aggregatetype, aggregateid, type, retry_count, \
                       last_error, to_char(created_ts AT TIME ZONE 'UTC', \
                         'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS created, \
                       to_char(last_retry_ts AT TIME ZONE 'UTC', \
                         'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS last_retry \
                     FROM hookline_outbox WHERE status = 'FAILED' \
                     ORDER BY created_ts LIMIT $1",
                )
                .bind(i64::from(failed_limit))
                .fetch_all(&self.pool),
            )
            .await?;
        Ok(status)
    }

    /// Puts `FAILED` tasks back to `NOT_CALLED` with their retries reset: the one `id`, or
    /// all of them. Returns how many.
    pub async fn retry_failed(&self, id: Option<&str>) -> Result<u64, OutboxError> {
        let retried = self
            .bounded(
                "retry",
                sqlx::query(
                    "UPDATE hookline_outbox SET status = 'NOT_CALLED', retry_count = 0, \
                       next_retry_ts = NULL \
                     WHERE status = 'FAILED' AND ($1::text IS NULL OR id = $1::uuid)",
                )
                .bind(id)
                .execute(&self.pool),
            )
            .await?;
        Ok(retried.rows_affected())
    }

    async fn bounded<T>(
        &self,
        op: &'static str,
        call: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, OutboxError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(source)) => Err(OutboxError::Postgres { op, source }),
            Err(_) => Err(OutboxError::Timeout {
                op,
                after: self.timeout,
            }),
        }
    }
}

/// The client's options from the URL, with the schema as the search path. The reason of
/// a failure never holds the URL or its password.
fn connect_options(settings: &StoreSettings) -> Result<PgConnectOptions, OutboxError> {
    let url = settings.url.expose();
    let invalid = |reason: String| OutboxError::config("postgres_url", reason);
    let parsed = url::Url::parse(url).map_err(|error| invalid(error.to_string()))?;
    if !matches!(parsed.scheme(), "postgres" | "postgresql") {
        return Err(invalid("not a postgres:// URL".to_owned()));
    }
    let options = PgConnectOptions::from_str(url).map_err(|error| {
        let mut text = error.to_string().replace(url, "<redacted>");
        if let Some(password) = parsed.password().filter(|p| !p.is_empty()) {
            text = text.replace(password, "<redacted>");
        }
        invalid(text)
    })?;
    Ok(options
        .application_name("hookline-outbox")
        .options([("search_path", settings.schema.as_str())]))
}
