//! Stage 3, admit: the endpoint's circuit breaker; a unit of the slow endpoints' pool when
//! its endpoint is not proven fast and the record holds none yet (a slow endpoint's record
//! without one goes to the slow lane at once); its concurrency and rate limits; then a global
//! attempt permit. The pool is the global capacity of slow endpoints and is taken first, so
//! nothing is held while waiting for it. A record waiting in memory moves on when its
//! endpoint turns slow (to the lane) or when it holds its partition's commit too long (to a
//! tier). The breaker is asked again once everything is held, as it may have opened
//! meanwhile. A strict-ordering endpoint's records are chained by the poll loop and cannot be
//! moved without breaking their order: they wait, cancellably.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use governor::clock::Clock;
use hookline_core::breaker::{Admission, CircuitBreaker};
use hookline_core::classify::Classification;
use tokio::sync::{AcquireError, OwnedSemaphorePermit};

use super::ctx::{Ctx, Delivery, Halt};
use super::validate::Target;
use crate::admission::{Class, Gate, SLOW, Unit};
use crate::metrics::Metrics;
use crate::operator::{Operator, hooks};

/// What an admitted attempt holds until its verdict.
pub(crate) struct Admitted<'a> {
    _unit: Option<Unit>,
    _endpoint_permit: OwnedSemaphorePermit,
    _global_permit: OwnedSemaphorePermit,
    breaker: Option<BreakerTicket<'a>>,
    /// The endpoint's standing, told how the attempt went (or that it was abandoned).
    gate: Option<&'a Gate>,
}

/// The breaker's claim on an attempt: its verdict is recorded once; a ticket dropped without
/// one (a cancelled probe) frees its probe slot. It borrows what it reports to from the
/// delivery's context and target, which outlive the attempt: nothing is cloned per attempt.
struct BreakerTicket<'a> {
    breaker: &'a Mutex<CircuitBreaker>,
    probe: bool,
    endpoint: &'a str,
    metrics: &'a Metrics,
    operator: &'a Operator,
}

fn lock(breaker: &Mutex<CircuitBreaker>) -> MutexGuard<'_, CircuitBreaker> {
    breaker
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if let Some(gate) = self.gate.take() {
            gate.attempt_abandoned();
        }
    }
}

impl Admitted<'_> {
    /// Tells the endpoint's standing and its breaker how the attempt went, and how long it
    /// took ([`Classification::endpoint_alive`]: a success, a final failure or a 409 shows
    /// the endpoint alive).
    pub fn verdict(&mut self, classification: &Classification, took: Duration) {
        if let Some(gate) = self.gate.take() {
            gate.attempt_ended(took, classification.endpoint_alive());
        }
        let Some(mut ticket) = self.breaker.take() else {
            return;
        };
        let now = Instant::now();
        let changed = {
            let mut breaker = lock(ticket.breaker);
            if classification.endpoint_alive() {
                breaker.record_success(now, ticket.probe)
            } else {
                breaker.record_failure(now, ticket.probe)
            }
        };
        if let Some(state) = changed {
            ticket.metrics.breaker_changed(ticket.endpoint, state);
            hooks::circuit(ticket.operator, ticket.endpoint, state, ticket.breaker);
        }
        // The verdict is in: nothing to free on drop.
        ticket.probe = false;
    }
}

impl Drop for BreakerTicket<'_> {
    fn drop(&mut self) {
        if self.probe {
            lock(self.breaker).probe_abandoned();
        }
    }
}

/// Admits one attempt of `target`, or halts: to the slow lane, deferred, or abandoned.
pub(crate) async fn admit<'a>(
    ctx: &'a Ctx,
    delivery: &Delivery,
    target: &'a Target,
) -> Result<Admitted<'a>, Halt> {
    let endpoint = &target.endpoint;
    let gate = &endpoint.gate;
    let strict = endpoint.config.strict_ordering;
    let first_tier = ctx.settings.first_tier_delay();
    let mut breaker = if strict {
        None
    } else {
        Some(breaker_ticket(ctx, target)?)
    };
    // A strict endpoint's record waits where it is (a move would break its order), and so
    // does a slow-lane record (a move would only go round; one whose key does not name its
    // endpoint, and so was admitted without its endpoint's standing, waits too).
    let from_lane = *delivery.record.topic == *ctx.settings.lane_topic;
    let in_place = strict || from_lane || delivery.ticket.waits_in_place();
    let unit = if delivery.ticket.has_unit() {
        None
    } else {
        match gate.class(Instant::now(), false) {
            Class::Fast => None,
            // Taken in while it was fast, it is not any more: to the lane.
            Class::Slow | Class::Unproven if !in_place => {
                return Err(Halt::Lane { why: SLOW });
            }
            Class::Slow | Class::Unproven => {
                let pool = &ctx.admission.pool;
                let (key, limit) = (gate.key(), gate.limit());
                let take = async { Ok::<_, AcquireError>(pool.take(key, limit).await) };
                Some(wait(delivery, in_place, None, take, first_tier).await?)
            }
        }
    };
    // Without a unit, a record moves to the lane when its endpoint turns slow.
    let slowed = (!in_place && unit.is_none() && !delivery.ticket.has_unit()).then_some(&**gate);
    let endpoint_permit = match Arc::clone(&endpoint.permits).try_acquire_owned() {
        Ok(permit) => permit,
        Err(_) => {
            let permit = Arc::clone(&endpoint.permits).acquire_owned();
            wait(delivery, in_place, slowed, permit, first_tier).await?
        }
    };
    if let Some(limiter) = &endpoint.limiter
        && let Err(not_until) = limiter.check()
    {
        let wait_time = not_until.wait_time_from(limiter.clock().now());
        if !strict && wait_time > ctx.settings.slow_after {
            return Err(Halt::Defer {
                why: "rate_limited",
                wait: wait_time,
            });
        }
        let ready = async {
            limiter.until_ready().await;
            Ok::<(), AcquireError>(())
        };
        wait(delivery, in_place, None, ready, wait_time).await?;
    }
    let global_permit = match Arc::clone(&ctx.global).try_acquire_owned() {
        Ok(permit) => permit,
        Err(_) => {
            let permit = Arc::clone(&ctx.global).acquire_owned();
            wait(delivery, in_place, None, permit, first_tier).await?
        }
    };
    // The breaker may have opened while this record waited.
    if breaker.as_ref().is_some_and(|ticket| !ticket.probe) {
        breaker = Some(breaker_ticket(ctx, target)?);
    }
    gate.attempt_started();
    Ok(Admitted {
        _unit: unit,
        _endpoint_permit: endpoint_permit,
        _global_permit: global_permit,
        breaker,
        gate: Some(gate),
    })
}

fn breaker_ticket<'a>(ctx: &'a Ctx, target: &'a Target) -> Result<BreakerTicket<'a>, Halt> {
    let endpoint = &target.endpoint;
    let (admission, changed) = lock(&endpoint.breaker).admit(Instant::now());
    if let Some(state) = changed {
        ctx.metrics.breaker_changed(&endpoint.id, state);
    }
    let probe = match admission {
        Admission::Allow => false,
        Admission::Probe => true,
        Admission::Reject { retry_in } => {
            return Err(Halt::Defer {
                why: "circuit_open",
                wait: retry_in.max(Duration::from_millis(1)),
            });
        }
    };
    Ok(BreakerTicket {
        breaker: &endpoint.breaker,
        probe,
        endpoint: &endpoint.id,
        metrics: &ctx.metrics,
        operator: &ctx.operator,
    })
}

/// Waits for `future`, or until the record is told to move on (its partition's commit held
/// too long: a tier, for about `wait`), or its endpoint turns slow (`slowed`: the slow
/// lane). A record that waits `in_place` (a strict endpoint's, whose order a move would
/// break; a slow-lane record waiting for its turn, which would only go round) is never moved
/// on. A closed semaphore means the dispatcher is stopping. A cancelled delivery is dropped
/// by its task, this wait with it (`poll::Spawn::run`).
async fn wait<T>(
    delivery: &Delivery,
    in_place: bool,
    slowed: Option<&Gate>,
    future: impl Future<Output = Result<T, AcquireError>>,
    wait: Duration,
) -> Result<T, Halt> {
    let moved = async {
        if in_place {
            std::future::pending::<()>().await;
        } else {
            delivery.moved_on().await;
        }
    };
    let turned_slow = async {
        match slowed {
            Some(gate) => turns_slow(gate).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        acquired = future => acquired.map_err(|_| Halt::Abandoned),
        () = moved => Err(Halt::Defer { why: "held_commit", wait }),
        () = turned_slow => Err(Halt::Lane { why: SLOW }),
    }
}

/// Returns once `gate`'s endpoint is slow: told by the attempt that shows it, or found at the
/// moment its attempts running now stall (none ending for `slow_after`), which nobody else
/// may look at while the poll loop is full.
async fn turns_slow(gate: &Gate) {
    loop {
        let notified = gate.slowed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if gate.class(Instant::now(), false) == Class::Slow {
            return;
        }
        match gate.stalls_at() {
            Some(at) => {
                tokio::select! {
                    () = &mut notified => return,
                    () = tokio::time::sleep_until(at.into()) => {}
                }
            }
            None => notified.await,
        }
    }
}
