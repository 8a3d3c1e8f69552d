//! What every delivery shares ([`Ctx`]), the record handed to one ([`Delivery`]), and why
//! one stops before an outcome of its own ([`Halt`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::intake::Intake;
use super::writer::{Abandoned, Writer};
use crate::admission::{Admission, Ticket};
use crate::cancellations::CancellationSet;
use crate::endpoints::lifecycle::EndpointLifecycle;
use crate::endpoints::{Endpoint, EndpointTable};
use crate::envelope::Failure;
use crate::http::HttpSender;
use crate::ledger::Ledger as LedgerStores;
use crate::metrics::Metrics;
use crate::record::SourceRecord;
use crate::settings::Settings;
use crate::signals::PartitionSignals;
use crate::telemetry::Telemetry;

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
    /// Which budget each record draws on: its endpoint's queue, or the slow endpoints' pool.
    pub admission: Admission,
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
    /// What admission gave it when it was taken in, held until the delivery ends.
    pub ticket: Ticket,
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
    /// Put off without an attempt to the slow lane, to wait for its endpoint's turn.
    Lane {
        /// Why (a low-cardinality label).
        why: &'static str,
    },
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
