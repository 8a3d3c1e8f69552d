//! Where the DLQ pages read (the topics, the registry) and how they link to one another: a
//! record's page, an event's page.

use hookline_dlq::{RecordRef, Sources};

use super::query;
use crate::state::AppState;

/// Where the console reads the DLQ.
pub fn sources(state: &AppState) -> Sources<'_> {
    let context = state.context();
    Sources {
        kafka: &context.kafka,
        registry: context.registry.clone(),
        dlq_topic: context.topics.dlq(),
        actions_topic: context.topics.dlq_actions(),
    }
}

/// The link to one record's page.
pub fn record_href(place: RecordRef) -> String {
    format!("/dlq/records/{}/{}", place.partition, place.offset)
}

/// The link to an event's page.
pub fn event_href(event_id: &str) -> String {
    format!("/events?{}", query(&[("id", event_id)]))
}

/// At most `max` characters of `text`, with `…` when cut.
pub fn short(text: &str, max: usize) -> String {
    let mut out: String = text.chars().take(max).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}
