//! The poll loop: hands records to bounded delivery tasks, pauses a retry partition whose
//! head is not due yet, chains a strict-ordering endpoint's records, keeps the lag gauge
//! current, and on shutdown stops fetching, drains within the grace period and commits.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::context::{DispatchContext, commit};
use crate::error::{DispatchError, Result};
use crate::metrics::Metrics;
use crate::offsets::PartitionKey;
use crate::process::{Ctx, deliver};
use crate::record::SourceRecord;
use crate::shared::Shared;

/// The dispatcher's consumer.
pub(crate) type DispatchConsumer = StreamConsumer<DispatchContext>;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Records due this close to now are handled rather than paused for.
const DUE_SLACK_MS: i64 = 5;

pub(crate) async fn run_loop(
    consumer: Arc<DispatchConsumer>,
    shared: Arc<Shared>,
    ctx: Arc<Ctx>,
    shutdown: CancellationToken,
    abandon: CancellationToken,
) -> Result<()> {
    let settings = Arc::clone(&ctx.settings);
    let pending = Arc::new(Semaphore::new(settings.max_pending));
    let mut tasks = JoinSet::new();
    let mut chains = OrderChains::new();
    loop {
        let next_resume = shared.next_resume().map(tokio::time::Instant::from_std);
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                if let Err(error) = joined {
                    tracing::error!(%error, "a delivery task failed");
                }
            }
            () = sleep_until(next_resume), if next_resume.is_some() => {
                resume_due(&consumer, &shared);
            }

            message = consumer.recv(), if pending.available_permits() > 0 => {
                let message = match message {
                    Ok(message) => message,
                    Err(error) => {
                        tracing::warn!(%error, "consumer error");
                        continue;
                    }
                };
                let record = SourceRecord::from_message(&message);
                drop(message);
                let key = record.partition_key();
                if shared.is_paused(&key) {
                    // Fetched before the pause took effect; it is fetched again on resume.
                    continue;
                }
                if let Some(due_ms) = record.meta().ok().flatten().and_then(|meta| meta.due_at_ms) {
                    let wait_ms = due_ms - now_ms();
                    if wait_ms > DUE_SLACK_MS {
                        let wait = Duration::from_millis(u64::try_from(wait_ms).unwrap_or(0));
                        pause_until(&consumer, &shared, &record, Instant::now() + wait);
                        continue;
                    }
                }
                let Ok(permit) = Arc::clone(&pending).try_acquire_owned() else {
                    return Err(DispatchError::Internal("pending permits ran out".to_owned()));
                };
                ctx.metrics.set_in_flight(shared.start(&key, record.offset));
                let (after, done) = order_chain(&ctx, &record, &mut chains);
                let (ctx, shared, consumer) = (Arc::clone(&ctx), Arc::clone(&shared), Arc::clone(&consumer));
                tasks.spawn(async move {
                    let _permit = permit;
                    let _done = done;
                    if let Some(previous) = after {
                        // Ends when the previous record of the same strict endpoint is done
                        // (its sender dropped), whatever its outcome.
                        let _ = previous.await;
                    }
                    if deliver(&ctx, &record).await.is_ok() {
                        ctx.metrics.set_in_flight(shared.finish(consumer.as_ref(), &key, record.offset));
                    }
                });
            }
        }
    }

    // Shutdown: stop fetching, let running deliveries finish within the grace period,
    // commit what is durable, leave the group.
    shared.readiness.set_consuming(false);
    if let Ok(assignment) = consumer.assignment()
        && let Err(error) = consumer.pause(&assignment)
    {
        tracing::debug!(%error, "pausing on shutdown");
    }
    let in_flight = tasks.len();
    tracing::info!(in_flight, "shutting down: draining deliveries");
    let drained = tokio::time::timeout(settings.shutdown_grace, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            left = tasks.len(),
            "grace period over; abandoning the rest (delivered again later)"
        );
        abandon.cancel();
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        shared.forget_all();
    }
    commit(consumer.as_ref());
    // Closing the consumer leaves the group with blocking calls: off the async workers.
    tokio::task::spawn_blocking(move || {
        consumer.unsubscribe();
        drop(consumer);
    })
    .await
    .map_err(|error| DispatchError::Internal(format!("closing the consumer: {error}")))?;
    tracing::info!("dispatcher stopped");
    Ok(())
}

/// The last record of each strict-ordering endpoint per partition: the next one waits for it.
type OrderChains = HashMap<(PartitionKey, String), oneshot::Receiver<()>>;

/// For a record of a strict-ordering endpoint (its key names the endpoint): what to wait
/// for before delivering it, and the sender whose drop lets the next one go.
fn order_chain(
    ctx: &Ctx,
    record: &SourceRecord,
    chains: &mut OrderChains,
) -> (Option<oneshot::Receiver<()>>, Option<oneshot::Sender<()>>) {
    let Some(endpoint_id) = record
        .key
        .as_deref()
        .and_then(|key| std::str::from_utf8(key).ok())
    else {
        return (None, None);
    };
    let strict = ctx
        .endpoints
        .get(endpoint_id)
        .is_some_and(|e| e.config.strict_ordering);
    if !strict {
        return (None, None);
    }
    let (done, next) = oneshot::channel();
    let previous = chains.insert((record.partition_key(), endpoint_id.to_owned()), next);
    (previous, Some(done))
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Pauses the record's partition and rewinds it to the record, which is fetched again when
/// it is due. The consumer keeps polling meanwhile (no sleep, no spin, no poll-interval
/// breach); other partitions flow.
fn pause_until(
    consumer: &DispatchConsumer,
    shared: &Shared,
    record: &SourceRecord,
    until: Instant,
) {
    let mut list = TopicPartitionList::new();
    list.add_partition(&record.topic, record.partition);
    if let Err(error) = consumer.pause(&list) {
        tracing::warn!(%error, topic = record.topic, "pausing a partition failed");
    }
    if let Err(error) = consumer.seek(
        &record.topic,
        record.partition,
        Offset::Offset(record.offset),
        Duration::ZERO,
    ) {
        tracing::warn!(%error, topic = record.topic, "rewinding a partition failed");
    }
    shared.rewind(&record.partition_key(), record.offset, until);
    tracing::debug!(
        topic = record.topic,
        partition = record.partition,
        offset = record.offset,
        "paused until due"
    );
}

/// Updates the consumer-lag gauge every few seconds until `shutdown`.
pub(crate) fn spawn_lag_gauge(
    consumer: Arc<DispatchConsumer>,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(10));
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let reader = Arc::clone(&consumer);
            // Watermark queries are blocking broker round trips.
            if let Ok(Some(lag)) = tokio::task::spawn_blocking(move || consumer_lag(&reader)).await
            {
                metrics.set_lag(lag);
            }
        }
    });
}

/// Records between the consumer's positions and the high watermarks, over its assigned
/// partitions.
fn consumer_lag(consumer: &DispatchConsumer) -> Option<i64> {
    let positions = consumer.position().ok()?;
    let mut lag = 0;
    for element in positions.elements() {
        let Offset::Offset(position) = element.offset() else {
            continue;
        };
        let watermarks =
            consumer.fetch_watermarks(element.topic(), element.partition(), Duration::from_secs(2));
        if let Ok((_, high)) = watermarks {
            lag += (high - position).max(0);
        }
    }
    Some(lag)
}

fn resume_due(consumer: &DispatchConsumer, shared: &Shared) {
    for (topic, partition) in shared.take_due(Instant::now()) {
        let mut list = TopicPartitionList::new();
        list.add_partition(&topic, partition);
        if let Err(error) = consumer.resume(&list) {
            tracing::warn!(%error, topic, "resuming a partition failed");
        }
    }
}
