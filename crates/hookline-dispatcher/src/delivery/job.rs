//! What one delivery learns on its way ([`Job`]), for whatever outcome it reaches.

use hookline_core::WebhookEvent;
use hookline_core::headers::DeliveryMeta;
use hookline_core::policy::RetryPolicy;

use super::ledger::Ticket;
use crate::events::Lifecycle;
use crate::record::SourceRecord;
use crate::telemetry::DeliverySpan;

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
    pub ledger: Option<Ticket<'a>>,
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
