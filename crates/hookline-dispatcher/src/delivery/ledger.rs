//! The delivery ledger in the delivery path: asked before the first attempt (Redis first,
//! then PostgreSQL, which also leases the delivery to this copy), told the outcome after.
//! A ledger that cannot answer never holds a delivery up: it is attempted, the error
//! counted (at-least-once).

use std::time::Duration;

use hookline_core::WebhookEvent;
use tokio_util::task::TaskTracker;

use super::ctx::Ctx;
use super::validate::Target;
use crate::clock::now_ms;
use crate::error::LedgerError;
use crate::events::Outcome;
use crate::ledger::{Claim, PgLedger, Terminal};
use crate::metrics::Metrics;

/// What the ledger says about a copy about to be delivered.
pub(crate) enum Check {
    /// Deliver it.
    Deliver,
    /// The endpoint has it already: not sent again.
    Duplicate,
    /// Another copy is being delivered under a live lease: put off about this long.
    Busy(Duration),
}

/// The PostgreSQL row a delivery will settle, and its lease (none when it could not be
/// taken). A delivery stopped before it settles (its partition revoked, or the shutdown's
/// grace over) gives the lease back as the ticket is dropped, so that the partition's next
/// owner delivers at once instead of waiting the lease out; unless it was stopped during an
/// attempt: the endpoint may still be working on that request, and the lease keeps a second
/// copy from being sent beside it until it runs out.
pub(crate) struct Ticket<'a> {
    pub endpoint: String,
    pub token: Option<String>,
    /// An attempt is out.
    attempting: bool,
    /// The lease to give back if the delivery is dropped unsettled (taken by [`settle`]).
    unsettled: Option<Unsettled<'a>>,
}

struct Unsettled<'a> {
    postgres: &'a PgLedger,
    /// The dispatcher's tasks, one of which gives a dropped ticket's lease back.
    tasks: &'a TaskTracker,
    metrics: &'a Metrics,
    event_id: String,
}

impl Ticket<'_> {
    /// Marks an attempt as out (`true`) or back (`false`).
    pub(crate) fn attempting(ticket: &mut Option<Self>, out: bool) {
        if let Some(ticket) = ticket {
            ticket.attempting = out;
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let (Some(lease), Some(token)) = (self.unsettled.take(), self.token.take()) else {
            return;
        };
        if self.attempting {
            return;
        }
        let postgres = lease.postgres.clone();
        let metrics = lease.metrics.clone();
        let endpoint = std::mem::take(&mut self.endpoint);
        lease.tasks.spawn(async move {
            match postgres.release(&endpoint, &lease.event_id, &token).await {
                Ok(()) => tracing::debug!("a stopped delivery gave its lease back"),
                Err(error) => {
                    metrics.ledger_error(error.store(), error.op());
                    tracing::warn!(%error, "a stopped delivery could not give its lease back");
                }
            }
        });
    }
}

fn failed(ctx: &Ctx, error: &LedgerError, what: &str) {
    ctx.metrics.ledger_error(error.store(), error.op());
    tracing::warn!(%error, store = error.store(), "the delivery ledger {what}; delivering anyway");
}

/// Asks the ledgers about this copy; with PostgreSQL, a copy to deliver leaves with a
/// [`Ticket`] in `ticket`.
pub(crate) async fn check<'a>(
    ctx: &'a Ctx,
    target: &Target,
    event: &WebhookEvent,
    ticket: &mut Option<Ticket<'a>>,
) -> Check {
    let Some(ledger) = &ctx.ledger else {
        return Check::Deliver;
    };
    let endpoint = target.endpoint.id.as_str();
    if let Some(redis) = &ledger.redis {
        match redis.was_delivered(endpoint, &event.event_id).await {
            Ok(true) => return Check::Duplicate,
            Ok(false) => {}
            Err(error) => failed(ctx, &error, "cannot be checked"),
        }
    }
    let Some(postgres) = &ledger.postgres else {
        return Check::Deliver;
    };
    let token = match postgres.claim(endpoint, &event.event_id).await {
        Ok(Claim::Claimed(token)) => Some(token),
        Ok(Claim::Succeeded) => return Check::Duplicate,
        Ok(Claim::Busy { remaining }) => {
            tracing::info!(
                remaining_ms = remaining.as_millis(),
                "another copy of this delivery is in flight under a live lease; put off"
            );
            // Back after a short wait rather than the whole lease: the other copy usually
            // ends well within it, and a copy coming back early is only put off again.
            return Check::Busy(remaining.clamp(Duration::from_secs(1), Duration::from_secs(5)));
        }
        Ok(Claim::Unclaimed) => None,
        Err(error) => {
            failed(ctx, &error, "cannot be checked");
            None
        }
    };
    *ticket = Some(Ticket {
        endpoint: endpoint.to_owned(),
        token,
        attempting: false,
        unsettled: Some(Unsettled {
            postgres,
            tasks: &ledger.tasks,
            metrics: &ctx.metrics,
            event_id: event.event_id.clone(),
        }),
    });
    Check::Deliver
}

/// Remembers a 2xx in Redis. The endpoint has the event whatever happens here, so a
/// failure is logged and counted, never turned into a retry.
pub(crate) async fn remember_delivered(ctx: &Ctx, target: &Target, event: &WebhookEvent) {
    let Some(redis) = ctx.ledger.as_ref().and_then(|ledger| ledger.redis.as_ref()) else {
        return;
    };
    match redis
        .record_delivered(&target.endpoint.id, &event.event_id, now_ms())
        .await
    {
        Ok(true) => {}
        Ok(false) => tracing::info!("the delivery ledger had this delivery already"),
        Err(error) => {
            ctx.metrics.ledger_error(error.store(), error.op());
            tracing::warn!(%error, "the delivery could not be remembered in the ledger");
        }
    }
}

/// Tells PostgreSQL how the delivery in `ticket` ended (`None`: abandoned), after
/// `attempts` attempts, the last answered with `last_status`: a durable outcome is recorded,
/// anything else gives the lease back so that the next copy goes at once.
pub(crate) async fn settle(
    ticket: &mut Option<Ticket<'_>>,
    attempts: u32,
    last_status: Option<u16>,
    outcome: Option<&Outcome>,
) {
    let Some(ticket) = ticket else {
        return;
    };
    // Settled here, whatever PostgreSQL answers: the drop has nothing left to give back.
    let Some(Unsettled {
        postgres,
        metrics,
        event_id,
        ..
    }) = ticket.unsettled.take()
    else {
        return;
    };
    let terminal = match outcome {
        Some(Outcome::Delivered { .. }) => Some(Terminal::Succeeded),
        Some(Outcome::RetryScheduled { .. }) => Some(Terminal::Failed),
        Some(Outcome::Parked { .. }) => Some(Terminal::Dlq),
        Some(Outcome::Deferred { .. } | Outcome::Hopped { .. } | Outcome::DuplicateSuppressed)
        | None => None,
    };
    let result = match (terminal, &ticket.token) {
        (Some(terminal), token) => postgres
            .finish(
                &ticket.endpoint,
                &event_id,
                token.as_deref(),
                terminal,
                attempts,
                last_status,
            )
            .await
            .map(|_| ()),
        (None, Some(token)) => postgres.release(&ticket.endpoint, &event_id, token).await,
        (None, None) => Ok(()),
    };
    if let Err(error) = result {
        metrics.ledger_error(error.store(), error.op());
        tracing::warn!(%error, "the delivery's outcome could not be recorded in the ledger");
    }
}
