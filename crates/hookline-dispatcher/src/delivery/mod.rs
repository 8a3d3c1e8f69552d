//! One delivery, from the consumed record to a durable outcome, as named stages read top to
//! bottom: decode -> validate -> admit -> attempt -> decide (hookline-core) -> write the
//! outcome. The poll loop then finishes the offset. A stage that cannot go on halts the
//! delivery with a reason: rejected (park), deferred (a tier, no attempt spent), or abandoned
//! (shutdown or revocation: the offset stays uncommitted).

mod admit;
mod attempt;
mod ctx;
mod decode;
mod hooks;
mod intake;
mod job;
mod ledger;
mod validate;
mod write;
mod writer;

use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_core::classify::classify;
use hookline_core::decision::{self, Decision, RetryState};
use hookline_core::envelope::ErrorReason;
use hookline_core::headers::{DeliveryMeta, TRACEPARENT};
use opentelemetry::KeyValue;

pub(crate) use ctx::{Ctx, Delivery};
pub(crate) use intake::{Intake, Written, intake};
pub(crate) use writer::{Abandoned, Writer};

use ctx::Halt;
use job::Job;

use crate::admission::Ticket;
use crate::attempts;
use crate::cancellations;
use crate::clock::now_ms;
use crate::envelope::Failure;
use crate::events::{Lifecycle, Outcome, Step};
use crate::telemetry::DeliverySpan;

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
    let stages = stages(ctx, delivery, &mut job).await;
    // Where the delivery goes is decided now: the attempt log dates it now, before the
    // write, so that a step never sorts after what the write led to (the slow lane's
    // attempt may come back before the write's acknowledgement does).
    let decided_ms = now_ms();
    let result = match stages {
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
        Err(Halt::Lane { why }) => Box::pin(write::lane(ctx, delivery, &mut job, why)).await,
    };
    // Whatever the end, the PostgreSQL ledger learns it (a lease is never left behind).
    ledger::settle(
        &mut job.ledger,
        job.meta.attempt,
        job.last_status,
        result.as_ref().ok(),
    )
    .await;
    let outcome = result?;
    hooks::outcome(
        &ctx.attempt_log,
        &job,
        &delivery.record,
        &outcome,
        decided_ms,
    );
    outcome.emit(&ctx.metrics, &mut job.life);
    Ok(outcome)
}

async fn stages<'a>(ctx: &'a Ctx, delivery: &Delivery, job: &mut Job<'a>) -> Result<Outcome, Halt> {
    job.life.step(Step::Validate);
    let span = tracing::Span::current();
    match &delivery.intake {
        // Its endpoint had no room for it: to the slow lane, decoded only so that its
        // history names it (a malformed record is parked here as it would be there).
        Intake::Deliver(meta) if let Ticket::ToLane(why) = delivery.ticket => {
            job.meta = meta.clone();
            if let Some(endpoint) = &delivery.endpoint {
                job.retry = endpoint.retry;
            }
            let event = job.event.insert(decode::event(ctx, delivery).await?);
            span.record("event_id", event.event_id.as_str());
            return Err(Halt::Lane { why });
        }
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
        admitted.verdict(&classification, attempt.took);
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
