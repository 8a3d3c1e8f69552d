//! The relay: claims batches of tasks, publishes them, records the outcome; wakes on
//! `NOTIFY` and polls; keeps the pending gauge and the retention.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesOrdered;
use hookline_core::WebhookEvent;
use hookline_core::pause::Pauses;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::listen::listen;
use super::task::Task;
use super::{
    Failure, OutboxError, OutboxMetrics, OutboxStore, RelaySettings, classify, task_backoff,
};
use crate::{Delivered, PublishError, Publisher};

/// Publishes the outbox's tasks with hookline's [`Publisher`] (its idempotent,
/// `acks=all` producer). Several relays may run on one table.
#[derive(Debug)]
pub struct Relay {
    store: OutboxStore,
    publisher: Arc<Publisher>,
    settings: RelaySettings,
    metrics: OutboxMetrics,
}

/// What became of one batch.
#[derive(Debug, Default, PartialEq, Eq)]
struct BatchOutcome {
    published: usize,
    refused: usize,
    unreachable: usize,
}

impl Relay {
    /// A relay over the table of `settings.store` (no connection is made here).
    pub fn new(settings: RelaySettings, publisher: Arc<Publisher>) -> Result<Relay, OutboxError> {
        let store = OutboxStore::new(&settings.store)?;
        Ok(Relay {
            store,
            publisher,
            settings,
            metrics: OutboxMetrics::default(),
        })
    }

    /// The relay's metrics, to register or read.
    pub fn metrics(&self) -> &OutboxMetrics {
        &self.metrics
    }

    /// The relay's store.
    pub fn store(&self) -> &OutboxStore {
        &self.store
    }

    /// Runs until `shutdown`: migrates first (when configured; again and again while
    /// PostgreSQL is unreachable), then publishes. The batch in flight when `shutdown`
    /// comes is finished and recorded. Never fails: an unreachable PostgreSQL or Kafka
    /// makes it wait and try again.
    pub async fn run(&self, shutdown: CancellationToken) {
        if self.settings.migrate && !self.migrate_until_done(&shutdown).await {
            return;
        }
        let wake = Arc::new(Notify::new());
        let tracker = TaskTracker::new();
        let stop = shutdown.child_token();
        tracker.spawn(listen(
            self.store.clone(),
            wake.clone(),
            self.settings.backoff_base,
            self.settings.backoff_max,
            stop.clone(),
        ));
        tracker.spawn(maintain(
            self.store.clone(),
            self.metrics.clone(),
            self.settings.clone(),
            stop.clone(),
        ));
        tracker.close();
        self.publish_loop(&wake, &shutdown).await;
        stop.cancel();
        tracker.wait().await;
        tracing::info!(relay = %self.settings.relay_id, "outbox relay stopped");
    }

    async fn migrate_until_done(&self, shutdown: &CancellationToken) -> bool {
        let mut backoff = Pauses::new(self.settings.backoff_base, self.settings.backoff_max);
        loop {
            match self.store.migrate().await {
                Ok(()) => return true,
                Err(error) => {
                    self.metrics.postgres_errors.inc();
                    let pause = backoff.next_pause();
                    tracing::warn!(error = %error_chain(&error), ?pause, "outbox: migration failed; trying again");
                    if !pause_or_stop(pause, shutdown).await {
                        return false;
                    }
                }
            }
        }
    }

    async fn publish_loop(&self, wake: &Notify, shutdown: &CancellationToken) {
        let settings = &self.settings;
        let mut postgres = Pauses::new(settings.backoff_base, settings.backoff_max);
        let mut kafka = Pauses::new(settings.backoff_base, settings.backoff_max);
        while !shutdown.is_cancelled() {
            let claimed = self
                .store
                .claim(&settings.relay_id, settings.lease, settings.batch_size)
                .await;
            let tasks = match claimed {
                Ok(tasks) => {
                    postgres.reset();
                    tasks
                }
                Err(error) => {
                    self.metrics.postgres_errors.inc();
                    let pause = postgres.next_pause();
                    tracing::warn!(error = %error_chain(&error), ?pause, "outbox: claiming tasks failed; trying again");
                    if !pause_or_stop(pause, shutdown).await {
                        break;
                    }
                    continue;
                }
            };
            if tasks.is_empty() {
                tokio::select! {
                    () = wake.notified() => {}
                    () = tokio::time::sleep(settings.poll_interval) => {}
                    () = shutdown.cancelled() => break,
                }
                continue;
            }
            let outcome = self.publish_batch(tasks, shutdown).await;
            if outcome.unreachable > 0 {
                let pause = kafka.next_pause();
                tracing::warn!(
                    tasks = outcome.unreachable,
                    ?pause,
                    "outbox: Kafka or the registry is unreachable; backing off"
                );
                if !pause_or_stop(pause, shutdown).await {
                    break;
                }
            } else {
                kafka.reset();
            }
        }
    }

    /// Publishes the claimed tasks and records each outcome.
    async fn publish_batch(&self, tasks: Vec<Task>, shutdown: &CancellationToken) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        let mut events = Vec::with_capacity(tasks.len());
        let mut ready = Vec::with_capacity(tasks.len());
        for task in tasks {
            match task.to_event() {
                Ok(event) => {
                    events.push(event);
                    ready.push(task);
                }
                Err(reason) => {
                    outcome.refused += 1;
                    self.refused(&task, &reason).await;
                }
            }
        }
        let results = self.publish_all(&events).await;
        let mut published = Vec::new();
        let mut unreachable = Vec::new();
        for (task, result) in ready.into_iter().zip(results) {
            match result {
                Ok(_) => published.push(task.id),
                Err(error) => match classify(&error) {
                    Failure::Transient => {
                        self.metrics.kafka_errors.inc();
                        tracing::debug!(task = %task.id, error = %error_chain(&error), "outbox: publish failed, Kafka unreachable");
                        unreachable.push(task.id);
                    }
                    Failure::Permanent => {
                        outcome.refused += 1;
                        self.refused(&task, &error_chain(&error)).await;
                    }
                },
            }
        }
        outcome.published = published.len();
        outcome.unreachable = unreachable.len();
        if !published.is_empty() {
            self.complete(&published, shutdown).await;
        }
        if !unreachable.is_empty()
            && let Err(error) = self
                .store
                .release(&self.settings.relay_id, &unreachable)
                .await
        {
            // The lease expires and the tasks are claimed again.
            self.metrics.postgres_errors.inc();
            tracing::warn!(error = %error_chain(&error), "outbox: releasing tasks failed");
        }
        outcome
    }

    /// Publishes `events` with at most `concurrency` in flight; results in their order.
    /// (A loop rather than `Publisher::publish_many`, whose stream of closures makes the
    /// relay's future not `Send`.)
    async fn publish_all(&self, events: &[WebhookEvent]) -> Vec<Result<Delivered, PublishError>> {
        let mut results = Vec::with_capacity(events.len());
        let mut waiting = events.iter();
        let mut in_flight = FuturesOrdered::new();
        loop {
            while in_flight.len() < self.settings.concurrency {
                match waiting.next() {
                    Some(event) => in_flight.push_back(self.publisher.publish(event)),
                    None => break,
                }
            }
            match in_flight.next().await {
                Some(result) => results.push(result),
                None => return results,
            }
        }
    }

    /// Marks `ids` `COMPLETE`, trying again while PostgreSQL is unreachable (until
    /// shutdown: then the leases expire and the tasks are published again, same ids).
    async fn complete(&self, ids: &[String], shutdown: &CancellationToken) {
        let mut backoff = Pauses::new(self.settings.backoff_base, self.settings.backoff_max);
        loop {
            match self.store.complete(ids).await {
                Ok(_) => {
                    self.metrics.published.inc_by(ids.len() as u64);
                    tracing::debug!(tasks = ids.len(), "outbox: tasks published");
                    return;
                }
                Err(error) => {
                    self.metrics.postgres_errors.inc();
                    let pause = backoff.next_pause();
                    tracing::warn!(error = %error_chain(&error), ?pause, "outbox: marking tasks COMPLETE failed; trying again");
                    if !pause_or_stop(pause, shutdown).await {
                        tracing::warn!(
                            tasks = ids.len(),
                            "outbox: stopping with published tasks not marked COMPLETE: they will be published again"
                        );
                        return;
                    }
                }
            }
        }
    }

    /// Records a publish the event made fail: a retry later, or `FAILED`.
    async fn refused(&self, task: &Task, reason: &str) {
        let retry_count = u32::try_from(task.retry_count)
            .unwrap_or(0)
            .saturating_add(1);
        let backoff = task_backoff(
            retry_count,
            self.settings.retry_base,
            self.settings.retry_max,
        );
        let result = self
            .store
            .fail(
                &self.settings.relay_id,
                &task.id,
                reason,
                self.settings.max_retries,
                backoff,
            )
            .await;
        match result {
            Ok(true) => {
                self.metrics.failed.inc();
                tracing::error!(task = %task.id, retry_count, error = reason, "outbox: task FAILED");
            }
            Ok(false) => {
                self.metrics.retries.inc();
                tracing::warn!(task = %task.id, retry_count, ?backoff, error = reason, "outbox: publish refused; will retry");
            }
            Err(error) => {
                self.metrics.postgres_errors.inc();
                tracing::warn!(task = %task.id, error = %error_chain(&error), "outbox: recording a refused publish failed");
            }
        }
    }
}

/// Every interval until `shutdown`: the pending gauge, then the retention in batches.
async fn maintain(
    store: OutboxStore,
    metrics: OutboxMetrics,
    settings: RelaySettings,
    shutdown: CancellationToken,
) {
    loop {
        match store.pending().await {
            Ok(pending) => {
                metrics.pending.set(pending);
            }
            Err(error) => {
                metrics.postgres_errors.inc();
                tracing::debug!(error = %error_chain(&error), "outbox: counting pending tasks failed");
            }
        }
        // A bounded number of batches per round, so that a large backlog does not keep
        // the connection busy for long.
        for _ in 0..10 {
            match store
                .delete_completed(settings.retention, settings.retention_batch)
                .await
            {
                Ok(deleted) if deleted < u64::from(settings.retention_batch) => break,
                Ok(_) => {}
                Err(error) => {
                    metrics.postgres_errors.inc();
                    tracing::debug!(error = %error_chain(&error), "outbox: retention failed");
                    break;
                }
            }
        }
        if !pause_or_stop(settings.maintenance_interval, &shutdown).await {
            return;
        }
    }
}

/// Sleeps `pause`; false if `shutdown` came first.
async fn pause_or_stop(pause: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        () = tokio::time::sleep(pause) => true,
        () = shutdown.cancelled() => false,
    }
}

/// An error and its causes on one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
