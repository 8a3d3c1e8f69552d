//! Archiving a selection of the DLQ to object storage, as `hookline dlq archive --to` does,
//! to the console's `archive_to`: `GET /dlq/confirm/archive` reads the selection (pinned in
//! time) and shows the records and the day folders they would land in, sending nothing to
//! the store; `POST /dlq/act/archive` (CSRF checked by the server) writes them as Avro
//! objects under `<prefix>/<dlq topic>/<yyyy>/<mm>/<dd>/` and lists the objects written.
//!
//! Archiving changes no record: each stays in the DLQ with its status and history. So it is
//! not one of the actions of the `<events>.dlq-actions` audit trail (a redrive, resolve or
//! note on one record, which sets or annotates that record's history), as it is not for the
//! CLI either; each run is logged with the user and role instead.

use std::collections::BTreeMap;

use axum::Form;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use hookline_dlq::archive::store::layout::{day_folder, park_day};
use hookline_dlq::archive::store::{ArchiveReport, ArchiveStore, archive_items};
use hookline_dlq::filter::now_ms;
use hookline_dlq::{DlqError, Filter, ReadOptions, RecordRef, SelectedItem, Selection};
use maud::{Markup, html};
use object_store::path::Path as ObjectPath;

use super::actions::back_href;
use super::layout::{Nav, csrf_field, page, respond, time};
use super::links::{event_href, record_href, sources};
use super::selector::Selector;
use super::{PageError, Params, error_chain, require};
use crate::auth::{Permission, Session};
use crate::state::AppState;

/// What an archive would write, read from the selection; nothing is sent to the store.
#[derive(Debug, Default)]
struct Preview {
    /// The first records: place, event id, park time.
    first: Vec<(RecordRef, String, i64)>,
    /// The records that would be written.
    records: u64,
    /// Records by the folder their object would land in, as the store names it.
    folders: BTreeMap<String, u64>,
    /// Matching records left out as redriven or resolved (the `open` status filter).
    hidden_handled: u64,
    /// Records that could not be decoded, so would not be written.
    undecodable: Vec<RecordRef>,
}

/// The 404 when no `archive_to` is configured.
fn not_set_up(session: &Session) -> PageError {
    PageError {
        status: StatusCode::NOT_FOUND,
        title: "Archiving is not set up",
        message: "This console has no archive destination: set `archive_to` in its [console] \
                  section (e.g. s3://bucket/prefix/) and restart it."
            .to_owned(),
        session: Some(session.clone()),
    }
}

/// A failed archive: the store's answer (or Kafka's), and what is left.
fn failed(session: &Session, error: &DlqError) -> PageError {
    match error {
        DlqError::Store(_) | DlqError::Avro { .. } | DlqError::Archive { .. } => PageError {
            status: StatusCode::BAD_GATEWAY,
            title: "The archive could not be written",
            message: format!(
                "{}. Objects this run completed stay; its other uploads were aborted. The DLQ is \
                 unchanged.",
                error_chain(error)
            ),
            session: Some(session.clone()),
        },
        _ => PageError::dlq(session, error),
    }
}

fn parse_request<'a>(
    state: &'a AppState,
    session: &Session,
    params: &Params,
) -> Result<(&'a ArchiveStore, Selector), PageError> {
    require(session, Permission::Act)?;
    let store = state.archive().ok_or_else(|| not_set_up(session))?;
    let selector = Selector::from_params(params).map_err(|m| PageError::bad_request(session, m))?;
    Ok((store, selector))
}

async fn open(
    state: &AppState,
    selector: &Selector,
    filter: Filter,
) -> Result<Selection, DlqError> {
    Selection::open(
        sources(state),
        filter,
        ReadOptions::default(),
        selector.status.include_handled(),
    )
    .await
}

/// Reads what `selector` (with `filter`) selects, as the archive would, keeping the first
/// `keep` records for the page.
async fn preview(
    state: &AppState,
    store: &ArchiveStore,
    selector: &Selector,
    filter: Filter,
    keep: usize,
) -> Result<Preview, DlqError> {
    let mut selection = open(state, selector, filter).await?;
    let topic = selection.topic().to_owned();
    let mut preview = Preview::default();
    while let Some(item) = selection.next().await? {
        match item {
            SelectedItem::Record(s) if selector.status.keeps(s.status()) => {
                let e = &s.record.envelope;
                let folder = day_folder(
                    store.prefix.as_ref(),
                    &topic,
                    park_day(e.error_timestamp_ms),
                );
                let shown = format!("{}/", store.display(&ObjectPath::from(folder)));
                *preview.folders.entry(shown).or_default() += 1;
                preview.records += 1;
                if preview.first.len() < keep {
                    let first = (s.record.place(), e.event_id.clone(), e.error_timestamp_ms);
                    preview.first.push(first);
                }
            }
            SelectedItem::Record(_) => {}
            SelectedItem::Undecodable(u) => preview.undecodable.push(RecordRef {
                partition: u.partition,
                offset: u.offset,
            }),
        }
    }
    preview.hidden_handled = selection.stats().hidden_handled;
    preview
        .undecodable
        .extend_from_slice(selection.skipped_undecodable());
    Ok(preview)
}

/// Archives what `selector` (with `filter`) selects to `store`, its status filter applied
/// as the list applies it.
async fn write(
    state: &AppState,
    store: &ArchiveStore,
    selector: &Selector,
    filter: Filter,
) -> Result<ArchiveReport, DlqError> {
    let mut selection = open(state, selector, filter).await?;
    let topic = selection.topic().to_owned();
    let status = selector.status;
    let items = futures::stream::unfold(&mut selection, move |s| async move {
        loop {
            match s.next().await {
                Ok(Some(SelectedItem::Record(r))) if !status.keeps(r.status()) => {}
                Ok(Some(item)) => return Some((Ok(item), s)),
                Ok(None) => return None,
                Err(error) => return Some((Err(error), s)),
            }
        }
    });
    let mut report = archive_items(items, store, &topic).await?;
    report.hidden_handled = selection.stats().hidden_handled;
    report
        .undecodable
        .extend_from_slice(selection.skipped_undecodable());
    Ok(report)
}

/// `GET /dlq/confirm/archive?<selection>`: what an archive will write, and where.
pub async fn confirm(
    State(state): State<AppState>,
    session: Session,
    Query(params): Query<Params>,
) -> Result<Response, PageError> {
    let (store, selector) = parse_request(&state, &session, &params)?;
    let now = now_ms();
    let bad = |e: hookline_dlq::FilterError| PageError::bad_request(&session, e.to_string());
    let pinned = selector.pinned(&selector.filter(now).map_err(bad)?, now);
    let filter = pinned.filter(now).map_err(bad)?;
    let keep = state.settings().confirm_preview;
    let preview = preview(&state, store, &pinned, filter, keep)
        .await
        .map_err(|e| PageError::dlq(&session, &e))?;
    let count = preview.records;
    let more = count.saturating_sub(preview.first.len() as u64);
    let title = format!("Confirm: archive {}", records_text(count));
    let body = html! {
        div.notice role="status" #confirm-summary {
            p {
                "This will archive " strong { (count) } " record" @if count != 1 { "s" }
                " to " code.path { (store.url.as_str()) } ": one Avro object per UTC day they were parked, in "
                (preview.folders.len()) " folder" @if preview.folders.len() != 1 { "s" } "."
            }
            p { "The records stay in the DLQ with their status. Archiving again writes new objects and never replaces one." }
            (left_out(preview.hidden_handled, &preview.undecodable))
        }
        @if !preview.folders.is_empty() {
            div.table-wrap {
                table #folders {
                    thead { tr { th scope="col" { "Folder" } th scope="col" { "Records" } } }
                    tbody {
                        @for (folder, records) in &preview.folders {
                            tr { td.wrap { code { (folder) } } td.num { (records) } }
                        }
                    }
                }
            }
        }
        @if !preview.first.is_empty() {
            div.table-wrap {
                table #touched {
                    thead { tr { th scope="col" { "Record" } th scope="col" { "Event" } th scope="col" { "Parked at" } } }
                    tbody {
                        @for (place, event_id, parked_ms) in &preview.first {
                            tr {
                                td { a href=(record_href(*place)) { (place.to_string()) } }
                                td.wrap { a href=(event_href(event_id)) { (event_id) } }
                                td { (time(*parked_ms)) }
                            }
                        }
                    }
                }
            }
            @if more > 0 { p.muted { "and " (more) " more." } }
        }
        @if count > 0 {
            form method="post" action="/dlq/act/archive" #confirm-form {
                (csrf_field(&session))
                @for (name, value) in pinned.pairs() { input type="hidden" name=(name) value=(value); }
                div.actions {
                    button type="submit" #confirm-button { "Yes, archive " (count) " record" @if count != 1 { "s" } }
                    a.button.secondary href=(back_href(&selector)) { "Cancel" }
                }
            }
        } @else {
            p { "Nothing to archive. " a href=(back_href(&selector)) { "Back" } }
        }
    };
    Ok(respond(
        StatusCode::OK,
        page(Some(&session), &title, Nav::Dlq, body),
    ))
}

/// `POST /dlq/act/archive`: writes the confirmed selection and lists the objects written.
pub async fn act(
    State(state): State<AppState>,
    session: Session,
    Form(params): Form<Params>,
) -> Result<Response, PageError> {
    let (store, selector) = parse_request(&state, &session, &params)?;
    let filter = selector
        .filter(now_ms())
        .map_err(|e| PageError::bad_request(&session, e.to_string()))?;
    let report = match write(&state, store, &selector, filter).await {
        Ok(report) => report,
        Err(error) => {
            tracing::warn!(
                user = %session.user,
                role = session.role.as_str(),
                action = "archive",
                destination = store.url.as_str(),
                error = %error_chain(&error),
                "console archive failed"
            );
            return Err(failed(&session, &error));
        }
    };
    tracing::info!(
        user = %session.user,
        role = session.role.as_str(),
        action = "archive",
        destination = store.url.as_str(),
        run = %report.run,
        objects = report.objects.len(),
        records = report.records,
        bytes = report.bytes,
        undecodable = report.undecodable.len(),
        "console archive"
    );
    let (records, objects) = (report.records, report.objects.len());
    let title = format!("Done: archived {}", records_text(records));
    let body = html! {
        div.notice.ok role="status" #result-summary {
            p {
                "Archived " strong { (records) } " record" @if records != 1 { "s" }
                " in " (objects) " object" @if objects != 1 { "s" } " (" (report.bytes) " bytes) to "
                code.path { (store.url.as_str()) } ", as " (session.user) " (" (session.role.as_str()) ")."
            }
            @if objects == 0 { p { "No record matched: no object was written." } }
            p { "The records stay in the DLQ with their status." }
            (left_out(report.hidden_handled, &report.undecodable))
        }
        @if objects > 0 {
            div.table-wrap {
                table #objects {
                    thead { tr {
                        th scope="col" { "Object" } th scope="col" { "Parked on (UTC)" }
                        th scope="col" { "Records" } th scope="col" { "Bytes" }
                    } }
                    tbody {
                        @for object in &report.objects {
                            tr {
                                td.wrap { code { (object.url) } }
                                td { (object.day.map_or_else(|| "undated".to_owned(), |d| d.to_string())) }
                                td.num { (object.records) }
                                td.num { (object.bytes) }
                            }
                        }
                    }
                }
            }
        }
        p { a href=(back_href(&selector)) { "Back" } }
    };
    Ok(respond(
        StatusCode::OK,
        page(Some(&session), &title, Nav::Dlq, body),
    ))
}

/// `1 record`, `2 records`.
fn records_text(count: u64) -> String {
    if count == 1 {
        "1 record".to_owned()
    } else {
        format!("{count} records")
    }
}

/// What matched but is not archived: handled records under the `open` filter, and records
/// that could not be decoded.
fn left_out(hidden_handled: u64, undecodable: &[RecordRef]) -> Markup {
    html! {
        @if hidden_handled > 0 {
            p { (hidden_handled) " redriven or resolved records match too and are left out (the status filter is open; choose all to archive them)." }
        }
        @if !undecodable.is_empty() {
            p {
                (undecodable.len()) " could not be decoded, so are not archived: "
                @for (i, place) in undecodable.iter().take(20).enumerate() {
                    @if i > 0 { ", " }
                    a href=(record_href(*place)) { (place.to_string()) }
                }
            }
        }
    }
}

/// The archive form for `selector` (it leads to the confirmation page), described as
/// `what`; shown only when archiving is on.
pub fn form(selector: &Selector, store: &ArchiveStore, what: &str) -> Markup {
    html! {
        section.panel #archive aria-labelledby="archive-heading" {
            h2 #archive-heading { "Archive " (what) }
            form.actions method="get" action="/dlq/confirm/archive" #archive-form {
                @for (name, value) in selector.pairs() { input type="hidden" name=(name) value=(value); }
                p {
                    "To " code.path { (store.url.as_str()) } ", as Avro objects by the day they were parked. The records stay in the DLQ."
                }
                button type="submit" #archive-button { "Archive…" }
            }
        }
    }
}
