//! What `hookline outbox status` shows.

use serde::Serialize;

/// Counts by state, the oldest waiting task and the tasks that failed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OutboxStatus {
    /// Tasks waiting (`NOT_CALLED`).
    pub not_called: i64,
    /// Tasks claimed by a relay (`WIP`).
    pub wip: i64,
    /// Tasks published and not yet deleted by the retention (`COMPLETE`).
    pub complete: i64,
    /// Tasks that failed `max_retries` times (`FAILED`).
    pub failed: i64,
    /// Age of the oldest task not yet published (`NOT_CALLED` or `WIP`), in seconds.
    pub oldest_pending_age_s: Option<f64>,
    /// The `FAILED` tasks, oldest first (at most the limit asked for).
    pub failed_tasks: Vec<FailedTask>,
}

/// A task that failed.
#[derive(Clone, Debug, PartialEq, Serialize, sqlx::FromRow)]
pub struct FailedTask {
    /// The task id (the event id).
    pub id: String,
    /// `endpoint` or `tenant`.
    pub aggregatetype: String,
    /// The endpoint or tenant id.
    pub aggregateid: String,
    /// The event type.
    #[sqlx(rename = "type")]
    #[serde(rename = "type")]
    pub event_type: String,
    /// Failed publishes.
    pub retry_count: i32,
    /// Why the last publish failed.
    pub last_error: Option<String>,
    /// When it was enqueued (RFC 3339).
    pub created: String,
    /// When it last failed (RFC 3339).
    pub last_retry: Option<String>,
}
