//! `GET /events?id=<event id>`: one event's history from the attempt log, as `hookline
//! events show` prints it (published, fan-out, each attempt and its answer, retries,
//! deferrals, parks, redrives, delivered), through the same reader. A viewer kept from
//! payloads does not see the answers' excerpts: an endpoint may echo the payload.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use hookline_dlq::RecordRef;
use hookline_dlq::filter::{TimeBound, now_ms};
use hookline_dlq::history::{Lookup, LookupOptions, Step, StepKind, lookup};
use maud::{Markup, html};

use super::layout::{Nav, page, respond, time};
use super::links::{record_href, short};
use super::{ECHO_HIDDEN, PageError, Params, payloads_hidden, query};
use crate::auth::Session;
use crate::state::AppState;

/// `GET /events?id=&since=`: the search form, or the event's story.
pub async fn show(
    State(state): State<AppState>,
    session: Session,
    Query(params): Query<Params>,
) -> Result<Response, PageError> {
    let id = params.get("id");
    let since = params.get("since");
    if id.is_empty() {
        let body = search_form(id, since);
        return Ok(respond(
            StatusCode::OK,
            page(Some(&session), "Event history", Nav::Events, body),
        ));
    }
    let topics = &state.context().topics;
    let mut options = LookupOptions::new(topics.attempts());
    if !since.is_empty() {
        let bound = TimeBound::parse("since", since)
            .map_err(|e| PageError::bad_request(&session, e.to_string()))?;
        options.since_ms = Some(bound.to_ms(now_ms()));
    }
    let context = state.context();
    let found = lookup(&context.kafka, &context.registry, id, &options)
        .await
        .map_err(|e| PageError::dlq(&session, &e))?;
    let title = format!("Event {id}");
    if found.story.is_empty() {
        let body = html! {
            (search_form(id, since))
            div.notice.error role="status" #no-story {
                p { "No attempt-log record of this event in " code { (found.topic) } " partition "
                    (found.partition) " (" (found.records_scanned) " records read): the id may be wrong, "
                    "its records past retention, or the attempt log off." }
            }
        };
        return Ok(respond(
            StatusCode::NOT_FOUND,
            page(Some(&session), &title, Nav::Events, body),
        ));
    }
    let body = story_body(
        &found,
        &topics.dlq(),
        payloads_hidden(state.settings(), &session),
    );
    Ok(respond(
        StatusCode::OK,
        page(Some(&session), &title, Nav::Events, body),
    ))
}

fn search_form(id: &str, since: &str) -> Markup {
    html! {
        form.panel method="get" action="/events" aria-label="Find an event" {
            div.grid {
                div {
                    label for="e-id" { "Event id" }
                    input #e-id type="text" name="id" value=(id) required;
                }
                div {
                    label for="e-since" { "Since" }
                    input #e-since type="text" name="since" value=(since) placeholder="all kept; or 2h, 2024-05-01";
                }
                div.actions { button type="submit" { "Show history" } }
            }
        }
    }
}

/// The story's page body; `dlq_topic` makes redrive steps link to their DLQ record;
/// `hide_echoes` leaves the endpoints' answers out.
pub fn story_body(found: &Lookup, dlq_topic: &str, hide_echoes: bool) -> Markup {
    let story = &found.story;
    let endpoints = story.endpoints();
    html! {
        dl.fields #event-summary {
            dt { "Event id" } dd { code { (story.event_id) } }
            @if let Some(tenant) = story.tenant_id() { dt { "Tenant" } dd { (tenant) } }
            dt { "Endpoints" } dd { (if endpoints.is_empty() { "-".to_owned() } else { endpoints.join(", ") }) }
            dt { "Dispatchers" } dd { (story.dispatchers().join(", ")) }
            dt { "Read" } dd { (found.records_scanned) " records of " code { (found.topic) } " partition " (found.partition) }
        }
        p { a href={ "/dlq?" (query(&[("event_id", &story.event_id), ("status", "all")])) } #event-dlq-link { "Its dead letters" } }
        div.table-wrap {
            table #steps aria-label="Steps" {
                thead { tr {
                    th scope="col" { "At" } th scope="col" { "Step" } th scope="col" { "Endpoint" }
                    th scope="col" { "Answer" } th scope="col" { "Detail" } th scope="col" { "Dispatcher" }
                } }
                tbody {
                    @for step in &story.steps { (step_row(step, dlq_topic, hide_echoes)) }
                }
            }
        }
    }
}

fn step_row(step: &Step, dlq_topic: &str, hide_echoes: bool) -> Markup {
    let record = step.record.as_ref();
    let name = match (step.kind, record) {
        (StepKind::Attempt, Some(r)) => format!("attempt {}", r.attempt),
        (kind, _) => kind.name().replace('_', " "),
    };
    let endpoint = record
        .and_then(|r| r.endpoint_id.as_deref())
        .or(step.endpoint_id.as_deref())
        .unwrap_or("-");
    html! {
        tr class={ "step-" (step.kind.name()) } {
            td { (time(step.at_ms)) }
            td { (name) }
            td { (endpoint) }
            td {
                @if let (StepKind::Attempt, Some(r)) = (step.kind, record) {
                    (r.http_status.map_or_else(|| "no answer".to_owned(), |s| format!("HTTP {s}")))
                    @if let Some(kind) = &r.error_kind { " · " (kind) }
                    @if let Some(ms) = r.duration_ms { " · " (ms) " ms" }
                }
            }
            td.wrap { (detail(step, dlq_topic, hide_echoes)) }
            td { (record.map(|r| r.dispatcher_id.as_str()).unwrap_or("")) }
        }
    }
}

fn detail(step: &Step, dlq_topic: &str, hide_echoes: bool) -> Markup {
    let record = step.record.as_ref();
    let tier = || record.and_then(|r| r.tier.as_deref()).unwrap_or("?");
    let reason = || record.and_then(|r| r.reason.as_deref()).unwrap_or("?");
    html! {
        @match step.kind {
            StepKind::Published => {}
            StepKind::Redriven => {
                @if let Some(from) = &step.redriven_from {
                    "from DLQ "
                    @match dlq_place(from, dlq_topic) {
                        Some(place) => { a href=(record_href(place)) { code { (from) } } }
                        None => { code { (from) } }
                    }
                }
            }
            StepKind::FannedOut => {
                "to " (record.and_then(|r| r.deliveries).map_or_else(|| "?".to_owned(), |n| n.to_string())) " deliveries"
            }
            StepKind::Attempt => {
                @if let Some(body) = record.and_then(|r| r.response_excerpt.as_deref()) {
                    @if hide_echoes {
                        "response " (ECHO_HIDDEN)
                    } @else {
                        "response " code { (short(body, 160)) }
                    }
                }
            }
            StepKind::Deferred if tier() == "lane" => { "to the slow lane (" (reason()) ")" }
            StepKind::RetryScheduled | StepKind::Deferred => { "to tier " (tier()) " (" (reason()) ")" }
            StepKind::Parked => {
                (reason()) " after " (record.map_or(0, |r| r.attempt)) " attempts"
            }
            StepKind::Delivered => { "after " (record.map_or(0, |r| r.attempt)) " attempts" }
        }
    }
}

/// The DLQ record `<topic>/<partition>/<offset>` names, when it is in `dlq_topic`.
fn dlq_place(from: &str, dlq_topic: &str) -> Option<RecordRef> {
    let rest = from.strip_prefix(dlq_topic)?.strip_prefix('/')?;
    rest.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redrives_link_to_records_of_this_dlq_only() {
        assert_eq!(
            dlq_place("ev.dlq/0/4", "ev.dlq"),
            Some(RecordRef {
                partition: 0,
                offset: 4
            })
        );
        assert_eq!(dlq_place("other.dlq/0/4", "ev.dlq"), None);
        assert_eq!(dlq_place("ev.dlq0/4", "ev.dlq"), None);
        assert_eq!(dlq_place("ev.dlq/x", "ev.dlq"), None);
    }
}
