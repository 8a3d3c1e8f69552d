//! `GET /dlq`: the DLQ list, newest first and paginated, filtered as `hookline dlq inspect`
//! filters, with counts by reason and by endpoint, and the actions on the selection
//! (archiving it too, when the console has an archive destination). A viewer kept from
//! payloads does not see the error messages either: they may quote the endpoint's answer.

use std::collections::BTreeMap;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use hookline_core::envelope::ErrorReason;
use hookline_dlq::filter::now_ms;
use hookline_dlq::{ReadOptions, RecordRef, Selected, SelectedItem, Selection};
use maud::{Markup, html};

use super::layout::{Nav, page, respond, status_badge, time};
use super::links::{event_href, record_href, short, sources};
use super::listing::{Listing, Pager};
use super::selector::{Selector, StatusFilter};
use super::{ECHO_HIDDEN, PageError, Params, actions, archive, payloads_hidden};
use crate::auth::{Permission, Session};
use crate::state::AppState;

/// `GET /dlq?reason=&tenant=&endpoint=&event_type=&event_id=&since=&until=&status=&page=`.
pub async fn list(
    State(state): State<AppState>,
    session: Session,
    Query(params): Query<Params>,
) -> Result<Response, PageError> {
    let selector =
        Selector::from_params(&params).map_err(|m| PageError::bad_request(&session, m))?;
    let pager = Pager::new(params.get("page"), state.settings().page_size);
    let filter = match selector.filter(now_ms()) {
        Ok(filter) => filter,
        Err(error) => {
            let body = html! {
                (filter_form(&selector))
                div.notice.error role="alert" { p { (error.to_string()) } }
            };
            return Ok(respond(
                StatusCode::BAD_REQUEST,
                page(Some(&session), "Dead letters", Nav::Dlq, body),
            ));
        }
    };
    let dlq_error = |e| PageError::dlq(&session, &e);
    let mut selection = Selection::open(
        sources(&state),
        filter,
        ReadOptions::default(),
        selector.status.include_handled(),
    )
    .await
    .map_err(dlq_error)?;
    let mut listing = Listing::new(pager.keep());
    let mut undecodable: Vec<RecordRef> = Vec::new();
    while let Some(item) = selection.next().await.map_err(dlq_error)? {
        match item {
            SelectedItem::Record(s) if selector.status.keeps(s.status()) => listing.add(*s),
            SelectedItem::Record(_) => {}
            SelectedItem::Undecodable(u) => undecodable.push(RecordRef {
                partition: u.partition,
                offset: u.offset,
            }),
        }
    }
    undecodable.extend_from_slice(selection.skipped_undecodable());
    let hidden = selection.stats().hidden_handled;
    let summary = listing.summary.clone();
    let records = listing.page(pager);
    let can_act = session.role.allows(Permission::Act);
    let body = html! {
        (filter_form(&selector))
        @if hidden > 0 {
            p.muted { (hidden) " redriven or resolved records are not shown "
                a href={ "/dlq?" (Selector { status: StatusFilter::All, ..selector.clone() }.query()) } { "(show all)" } }
        }
        @if !undecodable.is_empty() {
            div.notice.error role="status" {
                p { (undecodable.len()) " records could not be decoded: "
                    @for (i, place) in undecodable.iter().take(20).enumerate() {
                        @if i > 0 { ", " }
                        a href=(record_href(*place)) { (place.to_string()) }
                    }
                }
            }
        }
        section.counts aria-label="Counts" {
            (count_table("By reason", "reason", &summary.by_reason, &selector))
            (count_table("By endpoint", "endpoint", &summary.by_endpoint, &selector))
        }
        h2 #records-heading { (records_heading(summary.total, !selector.is_everything())) }
        (records_table(&records, payloads_hidden(state.settings(), &session)))
        (pager_links(&selector, pager, summary.total))
        @if can_act && summary.total > 0 {
            (actions::forms(&selector, "the records that match", matches!(selector.status, StatusFilter::Redriven | StatusFilter::Resolved)))
            @if let Some(store) = state.archive() {
                (archive::form(&selector, store, "the records that match"))
            }
        }
    };
    Ok(respond(
        StatusCode::OK,
        page(Some(&session), "Dead letters", Nav::Dlq, body),
    ))
}

/// `3 records`, `1 record`, or with a filter `3 records match`, `1 record matches`.
pub fn records_heading(total: u64, filtered: bool) -> String {
    match (total == 1, filtered) {
        (true, false) => "1 record".to_owned(),
        (true, true) => "1 record matches".to_owned(),
        (false, false) => format!("{total} records"),
        (false, true) => format!("{total} records match"),
    }
}

fn filter_form(selector: &Selector) -> Markup {
    let field = |name: &'static str, label: &'static str, value: &str, hint: &'static str| {
        html! {
            div {
                label for={ "f-" (name) } { (label) }
                input type="text" id={ "f-" (name) } name=(name) value=(value) placeholder=(hint)
                    list=[(name == "reason").then_some("reasons")];
            }
        }
    };
    html! {
        form.panel #filter method="get" action="/dlq" aria-label="Filter" {
            div.grid {
                (field("reason", "Reason", &selector.reason, "retries_exhausted"))
                (field("tenant", "Tenant", &selector.tenant, "acme"))
                (field("endpoint", "Endpoint", &selector.endpoint, "ep-1"))
                (field("event_type", "Event type", &selector.event_type, "invoice.paid"))
                (field("event_id", "Event id", &selector.event_id, ""))
                (field("since", "Parked since", &selector.since, "2h, 2024-05-01"))
                (field("until", "Parked before", &selector.until, "30m, RFC 3339"))
                div {
                    label for="f-status" { "Status" }
                    select #f-status name="status" {
                        @for s in StatusFilter::ALL {
                            option value=(s.as_str()) selected[s == selector.status] { (s.as_str()) }
                        }
                    }
                }
                @if !selector.record.is_empty() {
                    (field("record", "Records (partition/offset)", &selector.record, "0/42"))
                }
                div.actions {
                    button type="submit" { "Filter" }
                    a.button.secondary href="/dlq" { "Clear" }
                }
            }
            datalist #reasons {
                @for reason in ErrorReason::ALL { option value=(reason.code()); }
            }
        }
    }
}

fn count_table(
    title: &str,
    field: &'static str,
    counts: &BTreeMap<String, u64>,
    selector: &Selector,
) -> Markup {
    let mut sorted: Vec<(&String, &u64)> = counts.iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let id = format!("counts-{field}");
    html! {
        div {
            h2 id=(id) { (title) }
            @if sorted.is_empty() {
                p.muted { "None." }
            } @else {
                div.table-wrap {
                    table aria-labelledby=(id) {
                        thead { tr { th scope="col" { (field) } th scope="col" { "records" } } }
                        tbody {
                            @for (name, count) in sorted.iter().take(25) {
                                tr {
                                    td {
                                        @let narrowed = narrow(selector, field, name);
                                        a href={ "/dlq?" (narrowed.query()) } { (name) }
                                    }
                                    td.num { (count) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The selection narrowed to one reason or endpoint.
fn narrow(selector: &Selector, field: &str, value: &str) -> Selector {
    let mut s = selector.clone();
    match field {
        "reason" => s.reason = value.to_owned(),
        _ => s.endpoint = value.to_owned(),
    }
    s
}

/// The records' table; `hide_echoes` leaves their error messages out.
fn records_table(records: &[Selected], hide_echoes: bool) -> Markup {
    html! {
        @if records.is_empty() {
            p.muted #no-records { "No dead letters here." }
        } @else {
            div.table-wrap {
                table #records aria-labelledby="records-heading" {
                    thead {
                        tr {
                            th scope="col" { "Record" }
                            th scope="col" { "Parked at" }
                            th scope="col" { "Reason" }
                            th scope="col" { "Endpoint" }
                            th scope="col" { "Tenant" }
                            th scope="col" { "Event type" }
                            th scope="col" { "Event" }
                            th scope="col" { "Attempts" }
                            th scope="col" { "Status" }
                            th scope="col" { "Error" }
                        }
                    }
                    tbody {
                        @for s in records {
                            @let e = &s.record.envelope;
                            tr data-place=(s.record.place().to_string()) {
                                td { a href=(record_href(s.record.place())) { (s.record.place().to_string()) } }
                                td { (time(e.error_timestamp_ms)) }
                                td { code { (e.error_reason.code()) } }
                                td { (e.endpoint_id.as_deref().unwrap_or("-")) }
                                td { (e.tenant_id.as_deref().unwrap_or("-")) }
                                td { (e.event_type.as_deref().unwrap_or("-")) }
                                td.wrap { a href=(event_href(&e.event_id)) { (e.event_id) } }
                                td.num { (e.attempts) }
                                td { (status_badge(s.status())) }
                                td.wrap { (if hide_echoes { ECHO_HIDDEN.to_owned() } else { short(&e.error_message, 120) }) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn pager_links(selector: &Selector, pager: Pager, total: u64) -> Markup {
    let pages = pager.pages(total);
    let href = |n: usize| format!("/dlq?{}&page={n}", selector.query());
    html! {
        nav.pager aria-label="Pages" {
            @if pager.page > 1 {
                a href=(href(pager.page - 1)) rel="prev" { "← Newer" }
            }
            span { "Page " (pager.page) " of " (pages) }
            @if pager.page < pages && pager.page < super::listing::MAX_PAGE {
                a href=(href(pager.page + 1)) rel="next" { "Older →" }
            }
        }
    }
}
