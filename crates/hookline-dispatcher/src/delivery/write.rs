//! Stage 6, write the outcome: a retry copy in a tier (after a failed attempt, a deferral or
//! a hop) or an envelope in the DLQ, acknowledged by Kafka (idempotent producer, acks=all)
//! before the source offset may be stored. A broker that is down is waited for; a write that
//! can never succeed (a record over the size limit, a record the broker calls invalid) is
//! permanent: a copy that cannot be written is parked, and an envelope that cannot be
//! written is written again with the original payload cut, as its fields say.

use std::time::Duration;

use hookline_core::decision::{self, Decision, Schedule};
use hookline_core::envelope::{ErrorReason, Fit};
use hookline_core::pause::Pauses;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use super::ctx::{Ctx, Delivery};
use super::hooks;
use super::job::Job;
use super::writer::{Abandoned, FIRST_BACKOFF, MAX_BACKOFF, carried_headers, meta_headers};
use crate::clock::now_ms;
use crate::envelope::{Failure, build_envelope};
use crate::events::Outcome;
use crate::http::Attempt;
use crate::metrics::LANE;

/// Room left for a record's framing, key and headers beside its value.
const RECORD_OVERHEAD: usize = 512;
/// The size an envelope is cut to when the DLQ topic refuses even one within the producer's
/// limit (a topic whose `max.message.bytes` is smaller).
const SMALL_ENVELOPE: usize = 64 * 1024;

/// The DLQ reason of a record whose copy can never be written.
fn permanent_reason(error: &KafkaError) -> ErrorReason {
    match error {
        KafkaError::MessageProduction(
            RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::MessageBatchTooLarge,
        ) => ErrorReason::PayloadTooLarge,
        _ => ErrorReason::MalformedEvent,
    }
}

/// A failed attempt's retry copy in `schedule`'s tier. A copy that can never be written is
/// parked with the failed attempt's status.
pub(crate) async fn retry(
    ctx: &Ctx,
    delivery: &Delivery,
    job: &mut Job<'_>,
    schedule: Schedule,
    reason: &'static str,
    attempt: &Attempt,
) -> Result<Outcome, Abandoned> {
    let delay_ms = schedule
        .retry_at_ms
        .unwrap_or(schedule.due_at_ms)
        .saturating_sub(now_ms());
    let tier = schedule.tier.suffix.clone();
    let outcome = Outcome::RetryScheduled {
        tier,
        reason,
        delay_ms,
    };
    let context = format!("after {}: {}; ", job.meta.attempt, attempt.detail);
    let failed = Failed {
        context: &context,
        status: attempt.status(),
    };
    write_copy(ctx, delivery, job, schedule, outcome, failed).await
}

/// A record put off without an attempt: to a tier for about `wait` (no attempt spent, no
/// climb through the tiers), or to the DLQ once past its maximum age.
pub(crate) async fn defer(
    ctx: &Ctx,
    delivery: &Delivery,
    job: &mut Job<'_>,
    why: &'static str,
    wait: Duration,
) -> Result<Outcome, Abandoned> {
    let now = now_ms();
    let policy = job.retry;
    match decision::deferral(
        job.meta.first_attempt_at_ms,
        &policy,
        wait,
        now,
        &ctx.settings.tiers,
    ) {
        Decision::Retry(schedule) => {
            // A deferred record's age counts from its first deferral too, so that a breaker
            // that never closes still ends in the DLQ after the maximum age.
            job.meta.first_attempt_at_ms = Some(job.meta.first_attempt_at_ms.unwrap_or(now));
            let tier = schedule.tier.suffix.clone();
            let outcome = Outcome::Deferred { tier, why };
            write_copy(ctx, delivery, job, schedule, outcome, Failed::default()).await
        }
        Decision::Park(reason) => {
            let failure = Failure::new(reason, format!("{why} past the maximum age"));
            park(ctx, delivery, job, failure).await
        }
        Decision::Delivered => Err(Abandoned),
    }
}

/// A slow endpoint's record put off without an attempt to the slow lane, where it waits for
/// its endpoint's turn (its retry state unchanged); or to the DLQ once past its maximum age.
pub(crate) async fn lane(
    ctx: &Ctx,
    delivery: &Delivery,
    job: &mut Job<'_>,
    why: &'static str,
) -> Result<Outcome, Abandoned> {
    let now = now_ms();
    let policy = job.retry;
    let tiers = &ctx.settings.tiers;
    match decision::deferral(
        job.meta.first_attempt_at_ms,
        &policy,
        Duration::ZERO,
        now,
        tiers,
    ) {
        Decision::Retry(_) => {
            // Its age counts from its first deferral too, as for a tier.
            job.meta.first_attempt_at_ms = Some(job.meta.first_attempt_at_ms.unwrap_or(now));
            job.meta.due_at_ms = Some(now);
            job.meta.retry_at_ms = None;
            let outcome = Outcome::Deferred {
                tier: LANE.to_owned(),
                why,
            };
            let topic = &ctx.settings.lane_topic;
            write_to(ctx, delivery, job, topic, outcome, Failed::default()).await
        }
        Decision::Park(reason) => {
            let failure = Failure::new(reason, format!("{why} past the maximum age"));
            park(ctx, delivery, job, failure).await
        }
        Decision::Delivered => Err(Abandoned),
    }
}

/// A tier record whose wait outlasts its tier, written again for the rest of it.
pub(crate) async fn hop(
    ctx: &Ctx,
    delivery: &Delivery,
    job: &mut Job<'_>,
    schedule: Schedule,
) -> Result<Outcome, Abandoned> {
    let tier = schedule.tier.suffix.clone();
    let outcome = Outcome::Hopped { tier };
    write_copy(ctx, delivery, job, schedule, outcome, Failed::default()).await
}

/// What a copy that can never be written is parked with: the start of its message and the
/// last attempt's status.
#[derive(Default)]
struct Failed<'a> {
    context: &'a str,
    status: Option<u16>,
}

/// Writes the record's copy into `schedule`'s tier.
async fn write_copy(
    ctx: &Ctx,
    delivery: &Delivery,
    job: &mut Job<'_>,
    schedule: Schedule,
    outcome: Outcome,
    failed: Failed<'_>,
) -> Result<Outcome, Abandoned> {
    job.meta.due_at_ms = Some(schedule.due_at_ms);
    job.meta.retry_at_ms = schedule.retry_at_ms;
    let topic = ctx
        .settings
        .tiers
        .topic(&ctx.settings.events_topic, &schedule.tier);
    write_to(ctx, delivery, job, &topic, outcome, failed).await
}

/// Writes the record's copy, with its retry state, into `topic`, or parks it when the copy
/// can never be written.
async fn write_to(
    ctx: &Ctx,
    delivery: &Delivery,
    job: &mut Job<'_>,
    topic: &str,
    outcome: Outcome,
    failed: Failed<'_>,
) -> Result<Outcome, Abandoned> {
    match ctx.writer.copy(&delivery.record, &job.meta, topic).await {
        Ok(()) => Ok(outcome),
        Err(error) => {
            let message = format!(
                "{}the retry copy cannot be written: {error}",
                failed.context
            );
            let failure =
                Failure::new(permanent_reason(&error), message).with_status(failed.status);
            park(ctx, delivery, job, failure).await
        }
    }
}

/// Writes the DLQ envelope of `failure`. It is framed with the DLQ schema id registered at
/// start-up (no registry call), and cut to fit the producer's limit; if the topic still
/// refuses it, it is cut to a small size and written with hookline's headers alone; one
/// refused even then is retried with backoff (the DLQ topic itself is broken: an operator's problem,
/// shown in the logs and metrics), never dropped.
pub(crate) async fn park(
    ctx: &Ctx,
    delivery: &Delivery,
    job: &Job<'_>,
    failure: Failure,
) -> Result<Outcome, Abandoned> {
    let writer = &ctx.writer;
    let record = &delivery.record;
    let failure = match (&failure.target_url, &job.url) {
        (None, Some(url)) => failure.at(url),
        _ => failure,
    };
    let mut envelope = build_envelope(
        record,
        &job.meta,
        job.event.as_ref(),
        &failure,
        now_ms(),
        &ctx.settings.dispatcher_id,
    );
    let key = record.key.as_deref();
    let mut headers = carried_headers(record, &job.meta);
    let mut limit = room(writer.max_message_bytes, key, &headers);
    let mut cut_down = false;
    let mut pauses = Pauses::new(FIRST_BACKOFF, MAX_BACKOFF);
    loop {
        if let Fit::TooLarge { framed_len } = envelope.fit_within(limit) {
            tracing::error!(
                framed_len,
                limit,
                "a DLQ envelope cannot be cut to the limit"
            );
        }
        let bytes = match envelope.to_framed_avro(writer.dlq_schema_id) {
            Ok(bytes) => bytes,
            Err(error) => {
                // The envelope is built by this crate from a fixed schema: a bug.
                tracing::error!(%error, "the DLQ envelope cannot be encoded");
                return Err(Abandoned);
            }
        };
        match writer
            .produce(&writer.dlq_topic, key, Some(&bytes), &headers)
            .await
        {
            Ok(written) => {
                hooks::parked(
                    &ctx.operator,
                    job,
                    record,
                    &failure,
                    &writer.dlq_topic,
                    written,
                );
                return Ok(Outcome::Parked {
                    reason: failure.reason,
                    message: failure.message,
                    payload_cut: envelope.original_payload_truncated,
                });
            }
            Err(error) if !cut_down => {
                // The original headers travel inside the envelope (cut if need be); as
                // Kafka headers of the DLQ record only hookline's own are kept.
                tracing::warn!(%error, "the DLQ refused the envelope; cutting it further");
                cut_down = true;
                headers = meta_headers(&job.meta);
                limit = room(writer.max_message_bytes, key, &headers).min(SMALL_ENVELOPE);
            }
            Err(error) => {
                ctx.metrics.dlq_write_refused();
                tracing::error!(%error, "the DLQ topic refuses even a small envelope; retrying");
                tokio::time::sleep(pauses.next_pause()).await;
            }
        }
    }
}

/// What is left of `max_message_bytes` for a value beside `key` and `headers`.
fn room(max_message_bytes: usize, key: Option<&[u8]>, headers: &[(String, Vec<u8>)]) -> usize {
    let beside: usize = headers
        .iter()
        .map(|(name, value)| name.len() + value.len())
        .sum::<usize>()
        + key.map_or(0, <[u8]>::len)
        + RECORD_OVERHEAD;
    max_message_bytes.saturating_sub(beside)
}
