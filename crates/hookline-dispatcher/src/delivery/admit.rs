//! Stage 3, admit: the endpoint's circuit breaker, its queue (its share of the records in
//! flight), its concurrency and rate limits, then a global attempt permit. Every wait has a
//! deadline: a record that cannot start in time is deferred to a tier (no attempt spent)
//! rather than holding others back. The breaker is asked again once everything is held, as
//! it may have opened meanwhile. A strict-ordering endpoint's records are chained by the poll
//! loop and cannot be deferred without breaking their order: they wait, cancellably.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use governor::clock::Clock;
use hookline_core::breaker::{Admission, CircuitBreaker};
use hookline_core::classify::Classification;
use tokio::sync::{AcquireError, OwnedSemaphorePermit};

use super::ctx::{Ctx, Delivery, Halt};
use super::validate::Target;
use crate::endpoints::Endpoint;
use crate::metrics::Metrics;
use crate::operator::{Operator, hooks};

/// What an admitted attempt holds until its verdict.
pub(crate) struct Admitted<'a> {
    _slot: Option<OwnedSemaphorePermit>,
    _endpoint_permit: OwnedSemaphorePermit,
    _global_permit: OwnedSemaphorePermit,
    breaker: Option<BreakerTicket<'a>>,
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

impl Admitted<'_> {
    /// Tells the breaker how the attempt went ([`Classification::endpoint_alive`]: a
    /// success, a final failure or a 409 shows the endpoint alive).
    pub fn verdict(&mut self, classification: &Classification) {
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

/// Admits one attempt of `target`, or halts: deferred, or abandoned.
pub(crate) async fn admit<'a>(
    ctx: &'a Ctx,
    delivery: &Delivery,
    target: &'a Target,
) -> Result<Admitted<'a>, Halt> {
    let endpoint = &target.endpoint;
    let strict = endpoint.config.strict_ordering;
    let deadline = (!strict).then(|| Instant::now() + ctx.settings.queue_wait);
    let first_tier = ctx.settings.first_tier_delay();

    let mut breaker = if strict {
        None
    } else {
        Some(breaker_ticket(ctx, target)?)
    };
    // The endpoint's queue, then its concurrency, waited for as one wait: a record that
    // waits for both arms one timer and one move-on waiter, not two of each. A fast endpoint
    // frees a place soon, whatever its backlog; one that keeps every place for `queue_wait`
    // is slow, and the record goes to a tier, named by the place it was waiting for.
    let queued = AtomicBool::new(strict);
    let waiting_for = || {
        if queued.load(Ordering::Relaxed) {
            "endpoint_busy"
        } else {
            "endpoint_queue_full"
        }
    };
    let places = async {
        let slot = if strict {
            None
        } else {
            Some(Arc::clone(&endpoint.queue).acquire_owned().await?)
        };
        queued.store(true, Ordering::Relaxed);
        let permit = Arc::clone(&endpoint.permits).acquire_owned().await?;
        Ok((slot, permit))
    };
    let (slot, endpoint_permit) = wait(
        ctx,
        delivery,
        endpoint,
        deadline,
        places,
        waiting_for,
        first_tier,
    )
    .await?;
    if let Some(limiter) = &endpoint.limiter
        && let Err(not_until) = limiter.check()
    {
        let wait_time = not_until.wait_time_from(limiter.clock().now());
        let over = deadline.is_some_and(|deadline| Instant::now() + wait_time > deadline);
        if over {
            return Err(Halt::Defer {
                why: "rate_limited",
                wait: wait_time,
            });
        }
        let ready = async {
            limiter.until_ready().await;
            Ok::<(), AcquireError>(())
        };
        let ready = wait(
            ctx,
            delivery,
            endpoint,
            deadline,
            ready,
            || "rate_limited",
            wait_time,
        );
        ready.await?;
    }
    let global = Arc::clone(&ctx.global).acquire_owned();
    let global_permit = wait(
        ctx,
        delivery,
        endpoint,
        deadline,
        global,
        || "dispatcher_busy",
        first_tier,
    )
    .await?;
    // The breaker may have opened while this record waited.
    if breaker.as_ref().is_some_and(|ticket| !ticket.probe) {
        breaker = Some(breaker_ticket(ctx, target)?);
    }
    Ok(Admitted {
        _slot: slot,
        _endpoint_permit: endpoint_permit,
        _global_permit: global_permit,
        breaker,
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

/// Waits for `future` until `deadline` (none: no deadline) or the delivery's order to move
/// on. Past the deadline it waits on while the dispatcher has room or only its own
/// endpoint's records are held back ([`crate::pressure`]), and gives way (a tier) once
/// another's are, saying `why()` as it reads then. A closed semaphore means the dispatcher is
/// stopping. A cancelled delivery is dropped by its task, this wait with it
/// (`poll::Spawn::run`).
async fn wait<T>(
    ctx: &Ctx,
    delivery: &Delivery,
    endpoint: &Endpoint,
    deadline: Option<Instant>,
    future: impl Future<Output = Result<T, AcquireError>>,
    why: impl Fn() -> &'static str,
    wait: Duration,
) -> Result<T, Halt> {
    let expired = async {
        match deadline {
            Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
            None => std::future::pending().await,
        }
    };
    let moved = async {
        if deadline.is_some() {
            delivery.moved_on().await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(future, moved);
    // A free place is taken at once, before a timer and a cancellation waiter are
    // registered for a wait that does not happen (most waits, at a fast endpoint).
    tokio::select! {
        biased;
        acquired = &mut future => return acquired.map_err(|_| Halt::Abandoned),
        () = expired => {}
        () = &mut moved => return Err(Halt::Defer { why: "held_commit", wait }),
    }
    let mut pressure = ctx.pressure.subscribe();
    loop {
        if pressure.borrow_and_update().must_give_way(&endpoint.id) {
            return Err(Halt::Defer { why: why(), wait });
        }
        tokio::select! {
            acquired = &mut future => return acquired.map_err(|_| Halt::Abandoned),
            () = &mut moved => return Err(Halt::Defer { why: "held_commit", wait }),
            changed = pressure.changed() => {
                if changed.is_err() {
                    // The poll loop is gone: the dispatcher is stopping.
                    return Err(Halt::Defer { why: why(), wait });
                }
            }
        }
    }
}
