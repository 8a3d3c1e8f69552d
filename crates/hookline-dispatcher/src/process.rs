//! One delivery, from the consumed record to a durable outcome: decode, validate, look the
//! endpoint up, ask the ledger whether the endpoint has the event already, guard the URL,
//! ask the breaker, attempt over HTTP, classify, and then either done (remembered in the
//! ledger), a retry record in a tier, or an envelope in the DLQ.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hookline_core::WebhookEvent;
use hookline_core::classify::{AttemptOutcome, Classification, classify};
use hookline_core::envelope::ErrorReason;
use hookline_core::event::confluent_schema_id;
use hookline_core::headers::{DeliveryMeta, TRACEPARENT};
use hookline_core::policy::{Exhaustion, RetryDecision};
use hookline_core::trace::child_traceparent;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::breaker::{Admission, CircuitBreaker};
use crate::config::Settings;
use crate::deliver::{Attempt, HttpSender, RequestParts, build_request, precheck};
use crate::endpoints::{Endpoint, EndpointTable};
use crate::envelope::{Failure, build_envelope};
use crate::ledger::Ledger;
use crate::lifecycle::{Lifecycle, Step};
use crate::metrics::Metrics;
use crate::record::SourceRecord;
use crate::route::{Abandoned, Router};

/// Everything a delivery needs, shared by all of them.
pub(crate) struct Ctx {
    pub settings: Arc<Settings>,
    pub registry: Arc<hookline_kafka::Registry>,
    pub endpoints: Arc<EndpointTable>,
    pub http: HttpSender,
    pub router: Router,
    /// The delivery ledger, when configured.
    pub ledger: Option<Ledger>,
    pub metrics: Metrics,
    /// Attempts running at once, over all endpoints.
    pub global: Arc<Semaphore>,
    /// Cancelled when the shutdown grace period is over.
    pub abandon: CancellationToken,
}

/// How a delivery ended (all durable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Finished {
    Delivered,
    RetryScheduled,
    Deferred,
    Parked(ErrorReason),
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The delivery headers of a record never attempted before.
fn fresh_meta(record: &SourceRecord) -> DeliveryMeta {
    DeliveryMeta {
        attempt: 0,
        due_at_ms: None,
        original_topic: record.topic.clone(),
        original_partition: record.partition,
        original_offset: record.offset,
        first_attempt_at_ms: None,
        last_error: None,
    }
}

/// Delivers one record to a durable outcome.
#[tracing::instrument(name = "delivery", skip_all, fields(
    topic = %record.topic, partition = record.partition, offset = record.offset,
    event_id = tracing::field::Empty, endpoint = tracing::field::Empty,
    attempt = tracing::field::Empty,
))]
pub(crate) async fn deliver(ctx: &Ctx, record: &SourceRecord) -> Result<Finished, Abandoned> {
    let mut life = Lifecycle::new(&ctx.metrics);
    life.step(Step::Validate);
    let meta = match record.meta() {
        Ok(meta) => meta.unwrap_or_else(|| fresh_meta(record)),
        Err(error) => {
            let failure = Failure::new(
                ErrorReason::MalformedEvent,
                format!("unreadable hookline headers: {error}"),
            );
            return reject(ctx, &mut life, record, &fresh_meta(record), None, failure).await;
        }
    };
    let span = tracing::Span::current();
    span.record("attempt", meta.attempt + 1);

    let event = match decode(ctx, record).await? {
        Ok(event) => event,
        Err(failure) => return reject(ctx, &mut life, record, &meta, None, failure).await,
    };
    span.record("event_id", event.event_id.as_str());
    span.record("endpoint", event.endpoint_id.as_str());
    if let Err(error) = event.validate(ctx.settings.max_payload_bytes) {
        let failure = Failure::new(error.reason(), error.to_string());
        return reject(ctx, &mut life, record, &meta, Some(&event), failure).await;
    }
    let Some(endpoint) = ctx.endpoints.get(&event.endpoint_id) else {
        let failure = Failure::new(
            ErrorReason::UnknownEndpoint,
            format!("no endpoint {:?} is configured", event.endpoint_id),
        );
        return reject(ctx, &mut life, record, &meta, Some(&event), failure).await;
    };
    if !endpoint.config.enabled {
        let message = format!("endpoint {} is disabled", endpoint.id);
        let failure = Failure::new(ErrorReason::EndpointDisabled, message).at(&endpoint.config.url);
        return reject(ctx, &mut life, record, &meta, Some(&event), failure).await;
    }
    if already_delivered(ctx, &event).await {
        life.step(Step::Process);
        life.step(Step::Succeed);
        ctx.metrics.duplicate_suppressed();
        tracing::info!("already acknowledged by the endpoint (delivery ledger); not sent again");
        return Ok(Finished::Delivered);
    }
    let url = event
        .endpoint_url
        .as_deref()
        .unwrap_or(&endpoint.config.url);
    if let Err(error) = precheck(url, &ctx.settings.address_policy).await {
        let failure = Failure::new(ErrorReason::BlockedUrl, error.to_string()).at(url);
        return reject(ctx, &mut life, record, &meta, Some(&event), failure).await;
    }
    life.step(Step::Process);
    // A strict-ordering endpoint gets its records one after the other, in partition order
    // (the poll loop chains them): a failed attempt is retried here, after its backoff,
    // rather than through a tier, so nothing overtakes it.
    let strict = endpoint.config.strict_ordering;
    let mut meta = meta;
    loop {
        let mut probe = None;
        if !strict {
            let admission = lock(&endpoint.breaker).admit(Instant::now());
            match admission {
                Admission::Reject => {
                    return defer(ctx, record, &meta, &endpoint, "circuit open").await;
                }
                Admission::Probe => probe = Some(ProbeGuard(Some(Arc::clone(&endpoint.breaker)))),
                Admission::Allow => {}
            }
        }
        // A slot in the endpoint's queue. A fast endpoint frees one soon, whatever its
        // backlog; one that holds them all for `queue_wait` is slow, and its record goes to
        // a tier so that it does not hold the consumer's other endpoints back.
        let queue = Arc::clone(&endpoint.queue);
        let slot = if strict {
            queue.acquire_owned().await
        } else {
            match tokio::time::timeout(ctx.settings.queue_wait, queue.acquire_owned()).await {
                Ok(slot) => slot,
                Err(_) => {
                    return defer(ctx, record, &meta, &endpoint, "endpoint queue full").await;
                }
            }
        };
        let Ok(_slot) = slot else {
            return Err(Abandoned);
        };
        let attempt_no = meta.attempt + 1;
        tracing::Span::current().record("attempt", attempt_no);
        let first_attempt_at = meta.first_attempt_at_ms.unwrap_or_else(now_ms);
        let attempt = attempt_once(ctx, &endpoint, &event, record, attempt_no).await?;
        let classification = classify(attempt.outcome, &ctx.settings.classify);
        if let Some(probe) = probe.take() {
            probe.disarm();
        }
        let now = now_ms();
        let mut next = meta.clone();
        next.attempt = attempt_no;
        next.first_attempt_at_ms = Some(first_attempt_at);
        next.last_error = Some(attempt.detail.clone());
        let (reason, retry_after) = match classification {
            Classification::Success => {
                lock(&endpoint.breaker).record_success();
                ctx.metrics.attempt("success", attempt.took);
                life.step(Step::Succeed);
                ctx.metrics.delivered();
                tracing::info!(took_ms = attempt.took.as_millis(), "delivered");
                remember_delivered(ctx, &event).await;
                return Ok(Finished::Delivered);
            }
            Classification::NonRetryable { reason } => {
                // The endpoint answered: it is up, whatever it thought of this request.
                lock(&endpoint.breaker).record_success();
                ctx.metrics.attempt(reason.code(), attempt.took);
                life.step(Step::Fail);
                let failure = Failure::new(ErrorReason::NonRetryableStatus, attempt.detail.clone())
                    .with_status(status_of(&attempt.outcome))
                    .at(url);
                return park(ctx, &mut life, record, &next, Some(&event), failure).await;
            }
            Classification::Retryable {
                reason,
                retry_after,
            } => (reason, retry_after),
        };
        lock(&endpoint.breaker).record_failure(Instant::now());
        ctx.metrics.attempt(reason.code(), attempt.took);
        life.step(Step::Fail);
        let decision = endpoint.retry.decide(
            attempt_no,
            first_attempt_at,
            now,
            retry_after,
            &mut rand::rng(),
        );
        let delay = match decision {
            RetryDecision::RetryIn(delay) => delay,
            RetryDecision::Exhausted(exhaustion) => {
                let reason = match exhaustion {
                    Exhaustion::MaxAttempts => ErrorReason::RetriesExhausted,
                    Exhaustion::MaxAge => ErrorReason::MaxAgeExceeded,
                };
                let message = format!("after {attempt_no} attempts: {}", attempt.detail);
                let failure = Failure::new(reason, message)
                    .with_status(status_of(&attempt.outcome))
                    .at(url);
                return park(ctx, &mut life, record, &next, Some(&event), failure).await;
            }
        };
        if strict {
            tracing::info!(
                error = %attempt.detail, delay_ms = millis(delay),
                "attempt failed; retrying in place to keep the endpoint's order"
            );
            life.step(Step::Schedule);
            tokio::select! {
                () = ctx.abandon.cancelled() => return Err(Abandoned),
                () = tokio::time::sleep(delay) => {}
            }
            life.step(Step::Resume);
            meta = next;
            continue;
        }
        let tier = ctx.settings.tiers.tier_for(delay);
        let topic = ctx.settings.tiers.topic(&ctx.settings.events_topic, tier);
        next.due_at_ms = Some(now.saturating_add(millis(delay)));
        ctx.router.schedule_retry(record, &next, &topic).await?;
        life.step(Step::Schedule);
        ctx.metrics.retry_scheduled(&tier.suffix);
        tracing::info!(
            error = %attempt.detail, delay_ms = millis(delay), tier = %tier.suffix,
            "attempt failed; retry scheduled"
        );
        return Ok(Finished::RetryScheduled);
    }
}

/// Whether the ledger knows that the endpoint acknowledged this event already. A ledger
/// that cannot answer does not hold the delivery up: it is attempted (at-least-once).
async fn already_delivered(ctx: &Ctx, event: &WebhookEvent) -> bool {
    let Some(ledger) = &ctx.ledger else {
        return false;
    };
    match ledger
        .was_delivered(&event.endpoint_id, &event.event_id)
        .await
    {
        Ok(known) => known,
        Err(error) => {
            ctx.metrics.ledger_error(error.op());
            tracing::warn!(%error, "the delivery ledger cannot be checked; delivering anyway");
            false
        }
    }
}

/// Remembers a 2xx in the ledger. The endpoint has the event whatever happens here, so a
/// failure is logged and counted, never turned into a retry.
async fn remember_delivered(ctx: &Ctx, event: &WebhookEvent) {
    let Some(ledger) = &ctx.ledger else {
        return;
    };
    match ledger
        .record_delivered(&event.endpoint_id, &event.event_id, now_ms())
        .await
    {
        Ok(true) => {}
        Ok(false) => tracing::info!("the delivery ledger had this delivery already"),
        Err(error) => {
            ctx.metrics.ledger_error(error.op());
            tracing::warn!(%error, "the delivery could not be remembered in the ledger");
        }
    }
}

/// One HTTP attempt within the endpoint's limits: its concurrency permit, its rate limit,
/// then a global permit.
async fn attempt_once(
    ctx: &Ctx,
    endpoint: &Endpoint,
    event: &WebhookEvent,
    record: &SourceRecord,
    attempt_no: u32,
) -> Result<Attempt, Abandoned> {
    let Ok(_endpoint_permit) = Arc::clone(&endpoint.permits).acquire_owned().await else {
        return Err(Abandoned);
    };
    if let Some(limiter) = &endpoint.limiter {
        limiter.until_ready().await;
    }
    let Ok(_global_permit) = Arc::clone(&ctx.global).acquire_owned().await else {
        return Err(Abandoned);
    };
    // The attempt is a span of the event's trace (or starts one): receivers can join it.
    let parent = record
        .header(TRACEPARENT)
        .and_then(|value| std::str::from_utf8(value).ok());
    let traceparent = child_traceparent(parent, &mut rand::rng());
    let request = build_request(
        event,
        RequestParts {
            url: &endpoint.config.url,
            secrets: &endpoint.secrets,
            endpoint_headers: &endpoint.headers,
            timestamp_s: now_ms() / 1000,
            traceparent: Some(&traceparent),
            attempt: attempt_no,
        },
    );
    Ok(ctx.http.send(&request, endpoint.timeout).await)
}

/// Decodes the record's value: Confluent-framed Avro when it starts with the magic byte,
/// JSON otherwise. A registry that cannot be reached is waited for; a value that cannot be
/// decoded is a malformed event.
async fn decode(
    ctx: &Ctx,
    record: &SourceRecord,
) -> Result<Result<WebhookEvent, Failure>, Abandoned> {
    let malformed = |message: String| Ok(Err(Failure::new(ErrorReason::MalformedEvent, message)));
    let Some(value) = record.value.as_deref() else {
        return malformed("the record has no value".to_owned());
    };
    if confluent_schema_id(value).is_none() {
        return match WebhookEvent::from_json(value) {
            Ok(event) => Ok(Ok(event)),
            Err(error) => malformed(format!("not a webhook event: {error}")),
        };
    }
    let mut backoff = Duration::from_millis(200);
    let decoded = loop {
        match ctx.registry.decode(value).await {
            Ok(decoded) => break decoded,
            Err(error) if error.is_transient() => {
                tracing::warn!(%error, "the registry is unreachable; waiting to decode");
                tokio::select! {
                    () = ctx.abandon.cancelled() => return Err(Abandoned),
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
            Err(error) => return malformed(format!("cannot decode the Avro value: {error}")),
        }
    };
    match WebhookEvent::from_avro_value(decoded) {
        Ok(event) => Ok(Ok(event)),
        Err(error) => malformed(format!("not a webhook event: {error}")),
    }
}

/// Rejected before any attempt: straight to the DLQ.
async fn reject(
    ctx: &Ctx,
    life: &mut Lifecycle<'_>,
    record: &SourceRecord,
    meta: &DeliveryMeta,
    event: Option<&WebhookEvent>,
    failure: Failure,
) -> Result<Finished, Abandoned> {
    life.step(Step::Reject);
    park(ctx, life, record, meta, event, failure).await
}

async fn park(
    ctx: &Ctx,
    life: &mut Lifecycle<'_>,
    record: &SourceRecord,
    meta: &DeliveryMeta,
    event: Option<&WebhookEvent>,
    failure: Failure,
) -> Result<Finished, Abandoned> {
    let envelope = build_envelope(
        record,
        meta,
        event,
        &failure,
        now_ms(),
        &ctx.settings.dispatcher_id,
    );
    ctx.router.park(record, meta, envelope).await?;
    life.step(Step::Park);
    ctx.metrics.parked(failure.reason.code());
    tracing::warn!(reason = failure.reason.code(), error = %failure.message, "parked in the DLQ");
    Ok(Finished::Parked(failure.reason))
}

/// Sends a record to the next tier without an attempt (open breaker, full endpoint queue),
/// unless it is already older than the endpoint's maximum age.
async fn defer(
    ctx: &Ctx,
    record: &SourceRecord,
    meta: &DeliveryMeta,
    endpoint: &Endpoint,
    why: &str,
) -> Result<Finished, Abandoned> {
    let now = now_ms();
    let tiers = &ctx.settings.tiers;
    let all = tiers.tiers();
    let current = all
        .iter()
        .position(|tier| tiers.topic(&ctx.settings.events_topic, tier) == record.topic);
    let next_index = current.map_or(0, |index| (index + 1).min(all.len() - 1));
    let Some(tier) = all.get(next_index) else {
        return Err(Abandoned);
    };
    if let (Some(max_age), Some(first)) = (endpoint.retry.max_age, meta.first_attempt_at_ms)
        && now.saturating_sub(first) > millis(max_age)
    {
        let failure = Failure::new(
            ErrorReason::MaxAgeExceeded,
            format!("{why} past the maximum age"),
        );
        let mut life = Lifecycle::resumed(&ctx.metrics);
        return park(ctx, &mut life, record, meta, None, failure).await;
    }
    let mut next = meta.clone();
    next.due_at_ms = Some(now.saturating_add(millis(tier.delay)));
    // A deferred record's age counts from its first deferral too, so that a breaker that
    // never closes still ends in the DLQ after the maximum age.
    next.first_attempt_at_ms = Some(meta.first_attempt_at_ms.unwrap_or(now));
    let topic = tiers.topic(&ctx.settings.events_topic, tier);
    ctx.router.schedule_retry(record, &next, &topic).await?;
    ctx.metrics.retry_scheduled(&tier.suffix);
    tracing::info!(why, tier = %tier.suffix, "deferred without an attempt");
    Ok(Finished::Deferred)
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn lock(breaker: &Mutex<CircuitBreaker>) -> std::sync::MutexGuard<'_, CircuitBreaker> {
    breaker
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Frees the breaker's probe slot if a probe ends without a verdict (cancelled).
struct ProbeGuard(Option<Arc<Mutex<CircuitBreaker>>>);

impl ProbeGuard {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for ProbeGuard {
    fn drop(&mut self) {
        if let Some(breaker) = self.0.take() {
            lock(&breaker).probe_abandoned();
        }
    }
}

fn status_of(outcome: &AttemptOutcome) -> Option<u16> {
    match outcome {
        AttemptOutcome::Response { status, .. } => Some(*status),
        AttemptOutcome::Timeout | AttemptOutcome::Connect | AttemptOutcome::TooLarge => None,
    }
}
