//! One delivery, from the consumed record to a durable outcome, as named stages read top to
//! bottom: decode -> validate -> admit -> attempt -> decide (hookline-core) -> write the
//! outcome. The poll loop then finishes the offset. A stage that cannot go on halts the
//! delivery with a reason: rejected (park), deferred (a tier, no attempt spent), or abandoned
//! (shutdown or revocation: the offset stays uncommitted).

mod admit;
mod attempt;
mod decode;
mod ledger;
mod validate;
mod write;

use std::sync::Arc;
use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_core::classify::classify;
use hookline_core::decision::{self, Decision, RetryState};
use hookline_core::envelope::ErrorReason;
use hookline_core::headers::{DeliveryMeta, TRACEPARENT};
use hookline_core::policy::RetryPolicy;
use opentelemetry::KeyValue;
use tokio::sync::Semaphore;

pub(crate) use decode::{Intake, intake};
pub(crate) use write::{Abandoned, Writer};

use crate::attempts;
use crate::cancellations::{self, CancellationSet};
use crate::endpoints::lifecycle::EndpointLifecycle;
use crate::endpoints::{Endpoint, EndpointTable};
use crate::envelope::Failure;
use crate::events::{Lifecycle, Outcome, Step};
use crate::http::HttpSender;
use crate::ledger::Ledger as LedgerStores;
use crate::metrics::Metrics;
use crate::record::SourceRecord;
use crate::settings::Settings;
use crate::shared::PartitionSignals;
use crate::telemetry::{DeliverySpan, Telemetry};

/// The wall clock in epoch milliseconds (0 before 1970, saturated far in the future).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Everything a delivery needs, shared by all of them.
pub(crate) struct Ctx {
    pub settings: Arc<Settings>,
    pub registry: Arc<hookline_kafka::Registry>,
    pub endpoints: Arc<EndpointTable>,
    pub http: HttpSender,
    pub writer: Writer,
    /// The attempt log (never waited for).
    pub attempt_log: crate::attempts::AttemptLog,
    /// The delivery ledger, when configured.
    pub ledger: Option<LedgerStores>,
    pub metrics: Metrics,
    /// Attempts running at once, over all endpoints.
    pub global: Arc<Semaphore>,
    /// Who the poll loop holds back for want of a pending place.
    pub pressure: crate::pressure::Pressure,
    /// Trace export (spans of deliveries and attempts), when configured.
    pub telemetry: Telemetry,
    /// Disables endpoints that are gone or keep failing.
    pub lifecycle: EndpointLifecycle,
    /// The cancellations known (empty when they are not read).
    pub cancellations: Arc<CancellationSet>,
    /// Operational webhooks (never waited for).
    pub operator: crate::operator::Operator,
}

/// One record handed to a delivery task by the poll loop.
pub(crate) struct Delivery {
    pub record: SourceRecord,
    /// What intake read from its headers (never `NotDue`: those are not handed over).
    pub intake: Intake,
    /// What its partition's deliveries are told: to stop (revoked and not drained in time,
    /// or the shutdown grace period over), or, for the record holding the partition's
    /// commit position too long, to move on to a tier instead of waiting on.
    pub partition: Arc<PartitionSignals>,
    /// The endpoint its key names, looked up once at intake (`None`: unknown, or the key is
    /// not an endpoint id).
    pub endpoint: Option<Arc<Endpoint>>,
}

impl Delivery {
    /// Returns once this record is told to move on to a tier.
    pub async fn moved_on(&self) {
        self.partition.moved_on(self.record.offset).await;
    }
}

/// Why a delivery stops before an outcome of its own.
pub(crate) enum Halt {
    /// Rejected before any attempt (malformed, unknown endpoint, blocked URL...): the DLQ.
    Reject(Failure),
    /// Given up after an attempt: the DLQ.
    Park(Failure),
    /// Put off without an attempt: a tier, for about `wait`.
    Defer {
        /// Why (a low-cardinality label).
        why: &'static str,
        /// How long it should wait.
        wait: Duration,
    },
    /// Stopped: nothing was made durable, the offset stays uncommitted.
    Abandoned,
}

impl From<Abandoned> for Halt {
    fn from(_: Abandoned) -> Self {
        Halt::Abandoned
    }
}

/// What a delivery learnt on its way, for whatever outcome it reaches.
pub(crate) struct Job<'a> {
    /// The retry state: as read from a tier record, then as after the last attempt.
    pub meta: DeliveryMeta,
    /// The decoded event, once decoded.
    pub event: Option<WebhookEvent>,
    /// The URL delivered to, once chosen.
    pub url: Option<String>,
    /// The retry policy: the dispatcher's, then the endpoint's once it is known.
    pub retry: RetryPolicy,
    pub life: Lifecycle<'a>,
    /// The delivery's exported span.
    pub trace: DeliverySpan,
    /// The PostgreSQL ledger's row and lease, once the ledger let the delivery go on.
    pub ledger: Option<ledger::Ticket<'a>>,
    /// The HTTP status of the last attempt, if it got one.
    pub last_status: Option<u16>,
}

impl Job<'_> {
    /// The event's id; for a record never decoded, the id derived from its place, as its DLQ
    /// envelope names it.
    pub(crate) fn event_id(&self) -> String {
        self.event.as_ref().map_or_else(
            || {
                let meta = &self.meta;
                hookline_core::envelope::derived_event_id(
                    &meta.original_topic,
                    meta.original_partition,
                    meta.original_offset,
                )
            },
            |event| event.event_id.clone(),
        )
    }

    /// The endpoint: the event's, else the record's key (a record never decoded).
    pub(crate) fn endpoint_id(&self, source: &SourceRecord) -> Option<String> {
        self.event
            .as_ref()
            .and_then(|event| event.endpoint_id.clone())
            .or_else(|| {
                source
                    .key
                    .as_deref()
                    .and_then(|key| std::str::from_utf8(key).ok())
                    .map(str::to_owned)
            })
    }
}

/// Delivers one record to a durable outcome (or abandons it), and emits that outcome.
#[tracing::instrument(name = "delivery", skip_all, fields(
    topic = %delivery.record.topic, partition = delivery.record.partition,
    offset = delivery.record.offset, event_id = tracing::field::Empty,
    endpoint = tracing::field::Empty, attempt = tracing::field::Empty,
))]
pub(crate) async fn run(ctx: &Ctx, delivery: &Delivery) -> Result<Outcome, Abandoned> {
    let record = &delivery.record;
    let mut job = Job {
        meta: DeliveryMeta::new(&*record.topic, record.partition, record.offset),
        event: None,
        url: None,
        retry: ctx.settings.retry,
        life: Lifecycle::new(&ctx.metrics),
        trace: DeliverySpan::start(
            ctx.telemetry.tracer(),
            record,
            record
                .header(TRACEPARENT)
                .and_then(|value| std::str::from_utf8(value).ok()),
            &ctx.settings.group_id,
        ),
        ledger: None,
        last_status: None,
    };
    let result = match stages(ctx, delivery, &mut job).await {
        Ok(outcome) => Ok(outcome),
        Err(Halt::Abandoned) => Err(Abandoned),
        Err(Halt::Reject(failure)) => {
            job.life.step(Step::Reject);
            job.trace.failed("rejected");
            Box::pin(write::park(ctx, delivery, &job, failure)).await
        }
        Err(Halt::Park(failure)) => {
            job.trace.failed("parked");
            Box::pin(write::park(ctx, delivery, &job, failure)).await
        }
        Err(Halt::Defer { why, wait }) => {
            Box::pin(write::defer(ctx, delivery, &mut job, why, wait)).await
        }
    };
    // Whatever the end, the PostgreSQL ledger learns it (a lease is never left behind).
    ledger::settle(&mut job, result.as_ref().ok()).await;
    let outcome = result?;
    attempts::hooks::outcome(&ctx.attempt_log, &job, &delivery.record, &outcome);
    outcome.emit(&ctx.metrics, &mut job.life);
    Ok(outcome)
}

async fn stages<'a>(ctx: &'a Ctx, delivery: &Delivery, job: &mut Job<'a>) -> Result<Outcome, Halt> {
    job.life.step(Step::Validate);
    let span = tracing::Span::current();
    match &delivery.intake {
        Intake::Deliver(meta) => job.meta = meta.clone(),
        Intake::Hop(meta, schedule) => {
            job.meta = meta.clone();
            return Box::pin(write::hop(ctx, delivery, job, schedule.clone()))
                .await
                .map_err(Halt::from);
        }
        Intake::Malformed(failure) => return Err(Halt::Reject(failure.clone())),
        Intake::NotDue(_) => {
            tracing::error!("a record that is not due was handed to a delivery");
            return Err(Halt::Abandoned);
        }
    }
    span.record("attempt", job.meta.attempt.saturating_add(1));
    let event = job.event.insert(decode::event(ctx, delivery).await?);
    span.record("event_id", event.event_id.as_str());
    job.trace
        .set(|| KeyValue::new("webhook.event_id", event.event_id.clone()));
    let target = validate::target(ctx, delivery, event).await?;
    span.record("endpoint", target.endpoint.id.as_str());
    job.trace
        .set(|| KeyValue::new("webhook.endpoint_id", target.endpoint.id.to_string()));
    job.url = Some(target.url.clone());
    job.retry = target.endpoint.retry;
    match ledger::check(ctx, &target, event, &mut job.ledger).await {
        ledger::Check::Deliver => {}
        ledger::Check::Duplicate => return Ok(Outcome::DuplicateSuppressed),
        ledger::Check::Busy(wait) => {
            return Err(Halt::Defer {
                why: "in_flight",
                wait,
            });
        }
    }
    job.life.step(Step::Process);
    loop {
        let attempt_no = job.meta.attempt.saturating_add(1);
        // Before admission (which may defer, again and again while a circuit is open) and
        // after it (which may wait): no attempt once expired or cancelled.
        stop_before_attempt(ctx, event, &target, attempt_no)?;
        let mut admitted = admit::admit(ctx, delivery, &target).await?;
        if let Err(halt) = stop_before_attempt(ctx, event, &target, attempt_no) {
            drop(admitted);
            return Err(halt);
        }
        span.record("attempt", attempt_no);
        job.trace
            .set(|| KeyValue::new("webhook.attempt", i64::from(attempt_no)));
        let now = now_ms();
        let first_attempt_at = job.meta.first_attempt_at_ms.unwrap_or(now);
        ledger::Ticket::attempting(&mut job.ledger, true);
        let attempt = attempt::send(ctx, &target, event, &job.trace, attempt_no).await;
        ledger::Ticket::attempting(&mut job.ledger, false);
        let classification = classify(attempt.outcome, &ctx.settings.classify);
        let endpoint_id = target.endpoint.id.as_str();
        attempts::hooks::attempt(
            &ctx.attempt_log,
            &delivery.record,
            event,
            endpoint_id,
            attempt_no,
            &attempt,
            &classification,
        );
        admitted.verdict(&classification);
        if !target.url_overridden {
            ctx.lifecycle
                .observe(&target.endpoint, &classification, now);
        }
        ctx.metrics.attempt(&classification, attempt.took);
        job.meta.attempt = attempt_no;
        job.last_status = attempt.status();
        job.meta.first_attempt_at_ms = Some(first_attempt_at);
        job.meta.last_error = Some(attempt.detail.clone());
        let state = RetryState {
            attempts_made: attempt_no,
            age_origin_ms: target.age_origin(first_attempt_at, event),
        };
        let now = now_ms();
        let next = decision::after_attempt(
            state,
            &target.endpoint.retry,
            &classification,
            now,
            &ctx.settings.tiers,
            &mut rand::rng(),
        );
        drop(admitted);
        // A retry that would fall due at or past the deadline is parked now, not left to
        // wait in a tier for nothing.
        if let Decision::Retry(schedule) = &next
            && let Some(failure) = cancellations::retry_past_deadline(
                event,
                schedule.retry_at_ms.unwrap_or(schedule.due_at_ms),
                attempt_no,
                &attempt.detail,
            )
        {
            job.life.step(Step::Fail);
            let failure = failure.with_status(attempt.status()).at(&target.url);
            return Err(Halt::Park(failure));
        }
        match next {
            Decision::Delivered => {
                ledger::remember_delivered(ctx, &target, event).await;
                return Ok(Outcome::Delivered { took: attempt.took });
            }
            Decision::Park(reason) => {
                job.life.step(Step::Fail);
                let message = match reason {
                    ErrorReason::RetriesExhausted | ErrorReason::MaxAgeExceeded => {
                        format!("after {attempt_no} attempts: {}", attempt.detail)
                    }
                    _ => attempt.detail.clone(),
                };
                let failure = Failure::new(reason, message)
                    .with_status(attempt.status())
                    .at(&target.url);
                return Err(Halt::Park(failure));
            }
            Decision::Retry(schedule) if target.endpoint.config.strict_ordering => {
                // A strict endpoint's records wait in place, in partition order (the poll
                // loop chains them): nothing may overtake a record being retried.
                job.life.step(Step::Fail);
                job.life.step(Step::Schedule);
                let at = schedule.retry_at_ms.unwrap_or(schedule.due_at_ms);
                let wait = u64::try_from(at.saturating_sub(now)).unwrap_or(0);
                tracing::info!(
                    error = %attempt.detail, delay_ms = wait,
                    "attempt failed; retrying in place to keep the endpoint's order"
                );
                tokio::time::sleep(Duration::from_millis(wait)).await;
                job.life.step(Step::Resume);
            }
            Decision::Retry(schedule) => {
                job.life.step(Step::Fail);
                let reason = classification.code();
                return Box::pin(write::retry(ctx, delivery, job, schedule, reason, &attempt))
                    .await
                    .map_err(Halt::from);
            }
        }
    }
}

/// Halts the delivery, to be parked without an attempt, when its deadline has passed or it
/// was cancelled.
fn stop_before_attempt(
    ctx: &Ctx,
    event: &WebhookEvent,
    target: &validate::Target,
    attempt_no: u32,
) -> Result<(), Halt> {
    let endpoint = target.endpoint.id.as_str();
    match cancellations::before_attempt(&ctx.cancellations, event, endpoint, attempt_no, now_ms()) {
        Some(failure) => Err(Halt::Park(failure.at(&target.url))),
        None => Ok(()),
    }
}
