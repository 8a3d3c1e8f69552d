//! The poll loop: takes each record in (its headers read once), hands it to a bounded
//! delivery task, and finishes its offset when the outcome is durable. It pauses a partition
//! (rewound to the record, polling on for the others) while its head record is not due,
//! while its uncommitted window is full, or while a strict-ordering endpoint's chain on it is
//! full; and resumes it when that ends. Records that hold their partition's commit too long
//! are told to move on to a tier. Each record is admitted before it starts
//! ([`crate::admission`]): a fast endpoint's into its queue (its partition pauses while the
//! queue is full), a slow endpoint's with a unit of the slow endpoints' pool, or else to the
//! slow lane at once (a slow-lane record's partition pauses until a unit is kept for it).
//! A strict-ordering endpoint's records go to the lane in their chain, each once the one
//! before it is written, and are delivered from there in it.
//! When every pending place is taken, it holds the record it fetched last until one is free.
//! On shutdown it stops fetching, drains within the grace period and commits.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::{Semaphore, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admission::{STRICT, Ticket, Wait};
use crate::clock::now_ms;
use crate::context::{DispatchContext, commit};
use crate::delivery::{self, Ctx, Delivery, Intake, Written};
use crate::error::{DispatchError, Result};
use crate::fast::FastMap;
use crate::metrics::Metrics;
use crate::offsets::PartitionKey;
use crate::record::{SourceRecord, TopicNames};
use crate::shared::{Pause, Shared};

/// The dispatcher's consumer.
pub(crate) type DispatchConsumer = StreamConsumer<DispatchContext>;

/// How often held records and capacity pauses are looked at.
const TICK: Duration = Duration::from_millis(250);

pub(crate) async fn run_loop(
    consumer: Arc<DispatchConsumer>,
    shared: Arc<Shared>,
    ctx: Arc<Ctx>,
    shutdown: CancellationToken,
    abandon: CancellationToken,
) -> Result<()> {
    let settings = Arc::clone(&ctx.settings);
    let pending = Arc::new(Semaphore::new(settings.max_pending));
    // The delivery tasks: counted, not joined one by one (a task's end wakes nobody but
    // the drain on shutdown). A task that panics is reported by the runtime's panic hook.
    let tasks = TaskTracker::new();
    let mut chains = Chains::default();
    let mut topics = TopicNames::default();
    // A fetched record that found no pending place: no more are fetched until it has one.
    let mut held: Option<Ready> = None;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The shutdown's waiter, made once, not at each turn of the loop.
    let stopping = shutdown.cancelled();
    tokio::pin!(stopping);
    loop {
        let next_resume = shared.next_resume().map(tokio::time::Instant::from_std);
        tokio::select! {
            biased;
            () = &mut stopping => break,
            () = sleep_until(next_resume), if next_resume.is_some() => {
                resume_ready(&consumer, &shared, &chains, &ctx);
            }
            () = shared.progress.notified(), if shared.has_capacity_pauses() => {
                resume_ready(&consumer, &shared, &chains, &ctx);
            }
            _ = tick.tick() => {
                let told = shared.move_on_older_than(settings.max_hold, Instant::now());
                if told > 0 {
                    tracing::info!(records = told, "records held their partition's commit too long; moving them to a tier");
                }
                chains.sweep();
                let (units, lane_waiting) = ctx.admission.in_use();
                ctx.metrics.set_slow_budget(units, lane_waiting);
                resume_ready(&consumer, &shared, &chains, &ctx);
            }
            permit = Arc::clone(&pending).acquire_owned(), if held.is_some() => {
                let (Ok(permit), Some(ready)) = (permit, held.take()) else {
                    tracing::error!("the pending places are closed");
                    break;
                };
                if let Taken::Run(spawn) = admit(&consumer, &shared, &ctx, ready, permit) {
                    spawn.launch(&tasks, &ctx, &shared, &consumer);
                }
            }
            message = consumer.recv(), if held.is_none() => {
                let message = match message {
                    Ok(message) => message,
                    Err(error) => {
                        consumer_error(&ctx.metrics, &shared, &error);
                        continue;
                    }
                };
                shared.readiness.fetched();
                let record = SourceRecord::from_message(&message, &mut topics);
                drop(message);
                match take(&consumer, &shared, &ctx, &mut chains, &pending, record) {
                    Taken::Run(spawn) => {
                        spawn.launch(&tasks, &ctx, &shared, &consumer);
                    }
                    Taken::Full(ready) => held = Some(ready),
                    Taken::Paused => {}
                }
            }
        }
    }
    // A record still held was never started: its offset stays uncommitted.
    drop(held);

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
    tasks.close();
    let drained = tokio::time::timeout(settings.shutdown_grace, tasks.wait()).await;
    if drained.is_err() {
        tracing::warn!(
            left = tasks.len(),
            "grace period over; abandoning the rest (delivered again later)"
        );
        abandon.cancel();
        tasks.wait().await;
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

/// A record taken in, ready to run.
struct Spawn {
    delivery: Delivery,
    /// The pending place, held (for its drop) until the delivery ends.
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
    link: Option<Link>,
}

impl Spawn {
    /// Starts the delivery's task. Its future is boxed first: at about 3.8 KiB, moving it
    /// by value through the tracker's and tokio's spawn calls copied it six times; boxed,
    /// those copies are of a pointer.
    fn launch(
        self,
        tasks: &TaskTracker,
        ctx: &Arc<Ctx>,
        shared: &Arc<Shared>,
        consumer: &Arc<DispatchConsumer>,
    ) {
        let run = self.run(Arc::clone(ctx), Arc::clone(shared), Arc::clone(consumer));
        tasks.spawn(Box::pin(run));
    }

    /// Runs the delivery; its pending place is held until the end. The delivery
    /// is used where it lies in `self`, not moved out: a moved field keeps its place in the
    /// task besides its new one, and the task is most of what a waiting record costs.
    async fn run(mut self, ctx: Arc<Ctx>, shared: Arc<Shared>, consumer: Arc<DispatchConsumer>) {
        let delivery = &self.delivery;
        let _link_done = match self.link.take() {
            Some(mut link) => {
                tokio::select! {
                    () = delivery.partition.cancel.cancelled() => return,
                    () = link.previous() => {}
                }
                Some(link.done)
            }
            None => None,
        };
        let key = delivery.record.partition_key();
        let offset = delivery.record.offset;
        // Cancelled (revoked without draining, or shutdown's grace over): the delivery stops
        // wherever it is and its offset stays uncommitted. This is the one place a delivery's
        // waits end on cancellation (none of them watches for it itself); it is looked at
        // first, so a cancelled delivery takes no further step.
        let finished = tokio::select! {
            biased;
            () = delivery.partition.cancel.cancelled() => false,
            outcome = delivery::run(&ctx, delivery) => outcome.is_ok(),
        };
        // Its queue place or pool unit is free before the poll loop hears of the finish, so
        // a partition paused for it resumes then.
        drop(std::mem::take(&mut self.delivery.ticket));
        if finished {
            ctx.metrics
                .set_in_flight(shared.finish(consumer.as_ref(), &key, offset));
        }
    }
}

/// What became of a fetched record.
enum Taken {
    /// It runs.
    Run(Spawn),
    /// It needs a pending place and none is free: it waits in the poll loop.
    Full(Ready),
    /// Its partition paused instead (it is fetched again on resume), or it was not taken.
    Paused,
}

/// A record taken in that only needs a pending place to run.
struct Ready {
    record: SourceRecord,
    intake: Intake,
    endpoint: Option<Arc<crate::endpoints::Endpoint>>,
}

impl Ready {
    /// Starts its delivery, holding `permit` (none for a strict endpoint's chained record)
    /// and what admission gave it.
    fn start(
        self,
        shared: &Shared,
        ctx: &Ctx,
        permit: Option<tokio::sync::OwnedSemaphorePermit>,
        ticket: Ticket,
        link: Option<Link>,
    ) -> Spawn {
        let Ready {
            record,
            intake,
            endpoint,
        } = self;
        let (partition, in_flight) = shared.start(&record.partition_key(), record.offset);
        ctx.metrics.set_in_flight(in_flight);
        Spawn {
            delivery: Delivery {
                record,
                intake,
                partition,
                endpoint,
                ticket,
            },
            _permit: permit,
            link,
        }
    }
}

/// Takes one fetched record in: pauses its partition instead when it must wait, else makes
/// the delivery that runs it, or hands it back when no pending place is free.
fn take(
    consumer: &DispatchConsumer,
    shared: &Shared,
    ctx: &Ctx,
    chains: &mut Chains,
    pending: &Arc<Semaphore>,
    record: SourceRecord,
) -> Taken {
    let settings = &ctx.settings;
    let key = record.partition_key();
    if shared.is_paused(&key) {
        // Fetched before the pause took effect; it is fetched again on resume.
        return Taken::Paused;
    }
    let written = Written {
        events_topic: &settings.events_topic,
        tiers: &settings.tiers,
        lane_topic: &settings.lane_topic,
    };
    let intake = delivery::intake(&record, written, now_ms());
    if let Intake::NotDue(until_ms) = intake {
        let wait_ms = u64::try_from(until_ms.saturating_sub(now_ms())).unwrap_or(0);
        let until = Instant::now() + Duration::from_millis(wait_ms);
        pause(consumer, shared, &record, Pause::Until(until), &ctx.metrics);
        return Taken::Paused;
    }
    if shared.window_full(&key, record.offset, settings.max_uncommitted) {
        pause(consumer, shared, &record, Pause::WindowFull, &ctx.metrics);
        return Taken::Paused;
    }
    let endpoint = record.key_str().and_then(|id| ctx.endpoints.get(id));
    let strict = matches!(intake, Intake::Deliver(_))
        && endpoint
            .as_ref()
            .is_some_and(|endpoint| endpoint.config.strict_ordering);
    // A strict endpoint's records are chained per partition, bounded by the endpoint's
    // queue, and hold no pending permit meanwhile: a dead strict endpoint cannot take the
    // permits every other endpoint needs. Off the lane, each goes to the lane once the one
    // before it is written there (so they keep their order), and its offset commits: a slow
    // strict endpoint holds no partition other endpoints share. On the lane, each is
    // delivered once the one before it is done. When a chain is full, its partition pauses.
    if let (Some(strict_endpoint), true) = (&endpoint, strict) {
        let Some(link) = chains.join(&key, &strict_endpoint.id, settings.per_endpoint_queue) else {
            let full = Pause::ChainFull(strict_endpoint.id.clone());
            pause(consumer, shared, &record, full, &ctx.metrics);
            return Taken::Paused;
        };
        let ticket = if *record.topic == *settings.lane_topic {
            Ticket::Nothing
        } else {
            Ticket::ToLane(STRICT)
        };
        let ready = Ready {
            record,
            intake,
            endpoint,
        };
        let spawn = ready.start(shared, ctx, None, ticket, Some(link));
        return Taken::Run(spawn);
    }
    let ready = Ready {
        record,
        intake,
        endpoint,
    };
    match Arc::clone(pending).try_acquire_owned() {
        Ok(permit) => admit(consumer, shared, ctx, ready, permit),
        Err(_) => Taken::Full(ready),
    }
}

/// Admits a record that has its pending place: what it holds while it runs, or its
/// partition pauses until its endpoint can take it (the place is given back).
fn admit(
    consumer: &DispatchConsumer,
    shared: &Shared,
    ctx: &Ctx,
    ready: Ready,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Taken {
    let endpoint = match (&ready.intake, &ready.endpoint) {
        (Intake::Deliver(_), Some(endpoint)) => endpoint,
        // Not delivered here (a hop, a malformed record) or no known endpoint: nothing to
        // hold but its pending place.
        _ => return Taken::Run(ready.start(shared, ctx, Some(permit), Ticket::Nothing, None)),
    };
    let from_lane = *ready.record.topic == *ctx.settings.lane_topic;
    let circuit = endpoint
        .breaker
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .open_for_another(Instant::now());
    match ctx.admission.enter(&endpoint.gate, from_lane, circuit) {
        Ok(ticket) => Taken::Run(ready.start(shared, ctx, Some(permit), ticket, None)),
        Err(wait) => {
            let id = endpoint.id.clone();
            let why = match wait {
                Wait::QueueFull => Pause::QueueFull(id),
                Wait::LaneFull => Pause::LaneFull,
            };
            pause(consumer, shared, &ready.record, why, &ctx.metrics);
            Taken::Paused
        }
    }
}

/// A place in a strict endpoint's chain on one partition: waits for the record before it,
/// and lets the next one go when dropped (whatever the outcome).
struct Link {
    previous: Option<oneshot::Receiver<()>>,
    done: LinkDone,
}

struct LinkDone {
    _next: oneshot::Sender<()>,
    length: Arc<AtomicUsize>,
}

impl Drop for LinkDone {
    fn drop(&mut self) {
        self.length.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Link {
    async fn previous(&mut self) {
        if let Some(previous) = self.previous.take() {
            // Ends when the previous record is done: its sender dropped.
            let _ = previous.await;
        }
    }
}

/// The last record of each strict-ordering endpoint per partition, and how many records
/// the chain holds.
#[derive(Default)]
struct Chains(FastMap<(PartitionKey, String), (oneshot::Receiver<()>, Arc<AtomicUsize>)>);

impl Chains {
    /// Joins the chain of `endpoint` on `key`, unless it holds `capacity` records already.
    fn join(&mut self, key: &PartitionKey, endpoint: &str, capacity: usize) -> Option<Link> {
        let (done, next) = oneshot::channel();
        let place = (key.clone(), endpoint.to_owned());
        let length = self.0.get(&place).map_or_else(
            || Arc::new(AtomicUsize::new(0)),
            |(_, length)| Arc::clone(length),
        );
        if length.load(Ordering::Acquire) >= capacity.max(1) {
            return None;
        }
        length.fetch_add(1, Ordering::AcqRel);
        let previous = self
            .0
            .insert(place, (next, Arc::clone(&length)))
            .map(|(previous, _)| previous);
        Some(Link {
            previous,
            done: LinkDone {
                _next: done,
                length,
            },
        })
    }

    /// Whether the chain of `endpoint` on `key` has room (below half its capacity).
    fn has_room(&self, key: &PartitionKey, endpoint: &str, capacity: usize) -> bool {
        self.0
            .get(&(key.clone(), endpoint.to_owned()))
            .is_none_or(|(_, length)| length.load(Ordering::Acquire) <= capacity / 2)
    }

    /// Drops the chains that are empty.
    fn sweep(&mut self) {
        self.0
            .retain(|_, (_, length)| length.load(Ordering::Acquire) > 0);
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Pauses the record's partition and rewinds it to the record, which is fetched again on
/// resume. The consumer keeps polling meanwhile (no sleep, no spin, no poll-interval
/// breach); other partitions flow.
fn pause(
    consumer: &DispatchConsumer,
    shared: &Shared,
    record: &SourceRecord,
    why: Pause,
    metrics: &Metrics,
) {
    let mut list = TopicPartitionList::new();
    list.add_partition(&record.topic, record.partition);
    if let Err(error) = consumer.pause(&list) {
        tracing::warn!(%error, topic = &*record.topic, "pausing a partition failed");
    }
    if let Err(error) = consumer.seek(
        &record.topic,
        record.partition,
        Offset::Offset(record.offset),
        Duration::ZERO,
    ) {
        tracing::warn!(%error, topic = &*record.topic, "rewinding a partition failed");
    }
    tracing::debug!(
        topic = &*record.topic,
        partition = record.partition,
        offset = record.offset,
        why = why.label(),
        "partition paused"
    );
    shared.pause(&record.partition_key(), record.offset, why);
    for (label, count) in shared.paused_counts() {
        metrics.set_paused(label, count);
    }
}

/// Resumes every paused partition whose cause has ended.
fn resume_ready(consumer: &DispatchConsumer, shared: &Shared, chains: &Chains, ctx: &Ctx) {
    let capacity = ctx.settings.per_endpoint_queue;
    let admission = &ctx.admission;
    let may_go_on = |key: &PartitionKey, pause: &Pause| match pause {
        Pause::ChainFull(id) => chains.has_room(key, id, capacity),
        // An endpoint gone from the table waits for nothing.
        Pause::QueueFull(id) => ctx
            .endpoints
            .get(id)
            .is_none_or(|endpoint| admission.queue_has_room(&endpoint.gate)),
        Pause::LaneFull => admission.lane_has_room(),
        Pause::Until(_) | Pause::WindowFull => true,
    };
    let ready = shared.take_resumable(Instant::now(), ctx.settings.max_uncommitted, may_go_on);
    if ready.is_empty() {
        return;
    }
    for (topic, partition) in ready {
        let mut list = TopicPartitionList::new();
        list.add_partition(&topic, partition);
        if let Err(error) = consumer.resume(&list) {
            tracing::warn!(%error, topic = &*topic, "resuming a partition failed");
        }
    }
    for (label, count) in shared.paused_counts() {
        ctx.metrics.set_paused(label, count);
    }
}

/// A fetch error: counted by code, and shown by `/readyz` while it repeats.
fn consumer_error(metrics: &Metrics, shared: &Shared, error: &KafkaError) {
    let code = match error {
        KafkaError::MessageConsumption(code) | KafkaError::MessageConsumptionFatal(code) => {
            format!("{code:?}")
        }
        other => format!("{:?}", other.rdkafka_error_code()),
    };
    metrics.consumer_error(code);
    shared.readiness.consumer_error();
    tracing::warn!(%error, "consumer error");
}

/// Updates the consumer-lag gauge every few seconds until `shutdown`: records between the
/// committed offsets (what a crash would re-deliver from) and the high watermarks, over the
/// assigned partitions, so a paused or stuck partition shows its lag.
pub(crate) async fn lag_gauge(
    consumer: Arc<DispatchConsumer>,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let reader = Arc::clone(&consumer);
        // Offset and watermark queries are blocking broker round trips.
        if let Ok(Some(lag)) = tokio::task::spawn_blocking(move || consumer_lag(&reader)).await {
            metrics.set_lag(lag);
        }
    }
}

fn consumer_lag(consumer: &DispatchConsumer) -> Option<i64> {
    let committed = consumer.committed(Duration::from_secs(5)).ok()?;
    let mut lag = 0;
    for element in committed.elements() {
        let watermarks =
            consumer.fetch_watermarks(element.topic(), element.partition(), Duration::from_secs(2));
        let Ok((low, high)) = watermarks else {
            continue;
        };
        let from = match element.offset() {
            Offset::Offset(committed) => committed.max(low),
            _ => low,
        };
        lag += (high - from).max(0);
    }
    Some(lag)
}
