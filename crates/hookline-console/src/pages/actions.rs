//! Actions on one record or a filtered selection: redrive (to the main topic or a tier,
//! with a rate), resolve with a note, annotate (a note or a ticket id). Each goes through
//! a confirmation page (`GET /dlq/confirm/<action>`: a dry run showing what it will touch,
//! with the selection pinned in time), then `POST /dlq/act/<action>` (CSRF checked by the
//! server) runs it through the same library calls as `hookline dlq`, recorded in the
//! actions topic with the user and role, and the result page says what it did. Idempotent
//! as the CLI: a redriven or resolved record is skipped by a second redrive or resolve.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use hookline_dlq::filter::now_ms;
use hookline_dlq::redrive::{parse_rate, redrive};
use hookline_dlq::resolve::{Mark, mark};
use hookline_dlq::{Filter, RecordRef, RedriveOptions, Target};
use maud::{Markup, html};

use super::layout::{Nav, csrf_field, page, respond};
use super::links::{event_href, record_href, sources};
use super::selector::Selector;
use super::{PageError, Params, require};
use crate::auth::{Permission, Session};
use crate::state::AppState;

/// The longest note, in characters.
pub const MAX_NOTE_CHARS: usize = 2_000;

/// Which action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Re-publish.
    Redrive,
    /// Mark handled with a note.
    Resolve,
    /// Add a note or ticket id.
    Note,
}

impl Kind {
    /// The action named in the path.
    pub fn parse(text: &str) -> Option<Kind> {
        match text {
            "redrive" => Some(Kind::Redrive),
            "resolve" => Some(Kind::Resolve),
            "note" => Some(Kind::Note),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Kind::Redrive => "redrive",
            Kind::Resolve => "resolve",
            Kind::Note => "note",
        }
    }
}

/// An action with its options, validated.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Redrive to `target` at most `rate_per_s`.
    Redrive {
        /// Where.
        target: Target,
        /// The tier as given (empty: the main topic).
        tier: String,
        /// The rate as given.
        rate_text: String,
        /// Records per second.
        rate_per_s: Option<f64>,
    },
    /// Resolve with `note`.
    Resolve {
        /// Why.
        note: String,
    },
    /// Annotate.
    Note {
        /// The note as given.
        note: String,
        /// The ticket id as given.
        ticket: String,
    },
}

impl Plan {
    /// Reads and checks an action's fields.
    pub fn from_params(kind: Kind, params: &Params) -> Result<Plan, String> {
        match kind {
            Kind::Redrive => {
                let tier = params.get("tier").to_owned();
                let target = Target::parse((!tier.is_empty()).then_some(tier.as_str()))
                    .map_err(|_| format!("tier `{tier}` is not a delay such as 5s or 1m"))?;
                let rate_text = params.get("rate").to_owned();
                let rate_per_s = (!rate_text.is_empty())
                    .then(|| parse_rate(&rate_text))
                    .transpose()
                    .map_err(|_| {
                        format!("rate `{rate_text}` is not a rate such as 10/s or 100/m")
                    })?;
                Ok(Plan::Redrive {
                    target,
                    tier,
                    rate_text,
                    rate_per_s,
                })
            }
            Kind::Resolve => {
                let note = note_text(params.raw("note"))?;
                if note.is_empty() {
                    return Err("a note is required to resolve: it is the audit trail".into());
                }
                Ok(Plan::Resolve { note })
            }
            Kind::Note => {
                let note = note_text(params.raw("note"))?;
                let ticket = note_text(params.get("ticket"))?;
                if note.is_empty() && ticket.is_empty() {
                    return Err("give a note or a ticket id".into());
                }
                Ok(Plan::Note { note, ticket })
            }
        }
    }

    /// The fields that carry it in the confirmation's form.
    fn fields(&self) -> Vec<(&'static str, String)> {
        match self {
            Plan::Redrive {
                tier, rate_text, ..
            } => vec![("tier", tier.clone()), ("rate", rate_text.clone())],
            Plan::Resolve { note } => vec![("note", note.clone())],
            Plan::Note { note, ticket } => vec![("note", note.clone()), ("ticket", ticket.clone())],
        }
    }

    /// The note written to the audit trail: `ticket OPS-1: text`, either part alone.
    pub fn note(&self) -> Option<String> {
        match self {
            Plan::Redrive { .. } => None,
            Plan::Resolve { note } => Some(note.clone()),
            Plan::Note { note, ticket } => Some(match (ticket.is_empty(), note.is_empty()) {
                (false, false) => format!("ticket {ticket}: {note}"),
                (false, true) => format!("ticket {ticket}"),
                (true, _) => note.clone(),
            }),
        }
    }
}

/// A note as given, trimmed; line breaks and tabs are kept, other control characters
/// refused.
fn note_text(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.chars().count() > MAX_NOTE_CHARS {
        return Err(format!("a note is at most {MAX_NOTE_CHARS} characters"));
    }
    if text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err("a note must not hold control characters".into());
    }
    Ok(text.to_owned())
}

/// What an action did, or (in a dry run) would do.
struct Outcome {
    /// Records touched: place, event id (when known), where it went (redrive).
    touched: Vec<(RecordRef, Option<String>, Option<String>)>,
    /// Records refused, and why.
    refused: Vec<(RecordRef, String)>,
    /// Matching records skipped as already redriven or resolved.
    skipped_handled: u64,
    /// Records that could not be decoded.
    undecodable: Vec<RecordRef>,
}

async fn run(
    state: &AppState,
    session: &Session,
    filter: Filter,
    plan: &Plan,
    dry_run: bool,
) -> Result<Outcome, PageError> {
    let by = (session.user.as_str(), Some(session.role.as_str()));
    match plan {
        Plan::Redrive {
            target, rate_per_s, ..
        } => {
            let options = RedriveOptions {
                target: *target,
                events_topic: state.context().topics.events.clone(),
                dry_run,
                rate_per_s: *rate_per_s,
                by: session.user.clone(),
                role: Some(session.role.as_str().to_owned()),
            };
            let report = redrive(sources(state), filter, &options, |_| {})
                .await
                .map_err(|e| PageError::dlq(session, &e))?;
            Ok(Outcome {
                touched: report
                    .sent
                    .into_iter()
                    .map(|s| (s.place, Some(s.event_id), Some(s.target)))
                    .collect(),
                refused: report
                    .refused
                    .into_iter()
                    .map(|r| (r.place, r.why.to_string()))
                    .collect(),
                skipped_handled: report.skipped_handled,
                undecodable: report.undecodable,
            })
        }
        Plan::Resolve { .. } | Plan::Note { .. } => {
            let kind = match plan {
                Plan::Resolve { .. } => Mark::Resolve,
                _ => Mark::Note,
            };
            let note = plan.note();
            let report = mark(sources(state), filter, kind, note.as_deref(), by, dry_run)
                .await
                .map_err(|e| PageError::dlq(session, &e))?;
            Ok(Outcome {
                touched: report.marked.into_iter().map(|p| (p, None, None)).collect(),
                refused: Vec::new(),
                skipped_handled: report.skipped_handled,
                undecodable: report.undecodable,
            })
        }
    }
}

fn parse_request(
    session: &Session,
    action: &str,
    params: &Params,
) -> Result<(Kind, Selector, Plan), PageError> {
    require(session, Permission::Act)?;
    let kind =
        Kind::parse(action).ok_or_else(|| PageError::not_found(session, "no such action"))?;
    let selector = Selector::from_params(params).map_err(|m| PageError::bad_request(session, m))?;
    let plan = Plan::from_params(kind, params).map_err(|m| PageError::bad_request(session, m))?;
    Ok((kind, selector, plan))
}

fn verb(kind: Kind, done: bool) -> &'static str {
    match (kind, done) {
        (Kind::Redrive, false) => "redrive",
        (Kind::Redrive, true) => "redrove",
        (Kind::Resolve, false) => "resolve",
        (Kind::Resolve, true) => "resolved",
        (Kind::Note, false) => "annotate",
        (Kind::Note, true) => "annotated",
    }
}

/// Where "back" goes: the record's page for one record, else the list.
pub(super) fn back_href(selector: &Selector) -> String {
    match selector.record.parse::<RecordRef>() {
        Ok(place) => record_href(place),
        Err(_) => format!("/dlq?{}", selector.query()),
    }
}

/// `GET /dlq/confirm/<action>?<selection>&<options>`: what the action will touch.
pub async fn confirm(
    State(state): State<AppState>,
    session: Session,
    Path(action): Path<String>,
    Query(params): Query<Params>,
) -> Result<Response, PageError> {
    let (kind, selector, plan) = parse_request(&session, &action, &params)?;
    let now = now_ms();
    let bad = |e: hookline_dlq::FilterError| PageError::bad_request(&session, e.to_string());
    let pinned = selector.pinned(&selector.filter(now).map_err(bad)?, now);
    let filter = pinned.filter(now).map_err(bad)?;
    let outcome = run(&state, &session, filter, &plan, true).await?;
    let count = outcome.touched.len();
    let preview = state.settings().confirm_preview;
    let title = format!("Confirm: {} {count} records", verb(kind, false));
    let body = html! {
        div.notice role="status" #confirm-summary {
            p {
                "This will " (verb(kind, false)) " " strong { (count) } " record" @if count != 1 { "s" }
                @if let Plan::Redrive { target, rate_per_s, .. } = &plan {
                    " to " code { (target.topic(&state.context().topics.events)) }
                    @if let Some(rate) = rate_per_s { ", at most " (rate) " per second" }
                }
                @if let Some(note) = plan.note() { " with the note “" (note) "”" }
                "."
            }
            (skipped(&outcome))
        }
        (touched_table(&outcome, preview, false))
        @if count > 0 {
            form method="post" action={ "/dlq/act/" (kind.as_str()) } #confirm-form {
                (csrf_field(&session))
                @for (name, value) in pinned.pairs() { input type="hidden" name=(name) value=(value); }
                @for (name, value) in plan.fields() { input type="hidden" name=(name) value=(value); }
                div.actions {
                    button type="submit" #confirm-button { "Yes, " (verb(kind, false)) " " (count) " record" @if count != 1 { "s" } }
                    a.button.secondary href=(back_href(&selector)) { "Cancel" }
                }
            }
        } @else {
            p { "Nothing to do. " a href=(back_href(&selector)) { "Back" } }
        }
    };
    Ok(respond(
        StatusCode::OK,
        page(Some(&session), &title, Nav::Dlq, body),
    ))
}

/// `POST /dlq/act/<action>`: runs the confirmed action and says what it did.
pub async fn act(
    State(state): State<AppState>,
    session: Session,
    Path(action): Path<String>,
    Form(params): Form<Params>,
) -> Result<Response, PageError> {
    let (kind, selector, plan) = parse_request(&session, &action, &params)?;
    let filter = selector
        .filter(now_ms())
        .map_err(|e| PageError::bad_request(&session, e.to_string()))?;
    let outcome = run(&state, &session, filter, &plan, false).await?;
    tracing::info!(
        user = %session.user,
        role = session.role.as_str(),
        action = kind.as_str(),
        records = outcome.touched.len(),
        skipped = outcome.skipped_handled,
        "console action"
    );
    let count = outcome.touched.len();
    let title = format!("Done: {} {count} records", verb(kind, true));
    let body = html! {
        div.notice.ok role="status" #result-summary {
            p {
                (capitalized(verb(kind, true))) " " strong { (count) } " record" @if count != 1 { "s" }
                ", recorded in the audit trail as " (session.user) " (" (session.role.as_str()) ")."
            }
            (skipped(&outcome))
        }
        (touched_table(&outcome, state.settings().confirm_preview, kind == Kind::Redrive))
        p { a href=(back_href(&selector)) { "Back" } }
    };
    Ok(respond(
        StatusCode::OK,
        page(Some(&session), &title, Nav::Dlq, body),
    ))
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn skipped(outcome: &Outcome) -> Markup {
    html! {
        @if outcome.skipped_handled > 0 {
            p { (outcome.skipped_handled) " already redriven or resolved: left alone (as the CLI does)." }
        }
        @if !outcome.refused.is_empty() {
            p { (outcome.refused.len()) " refused; they stay open:" }
            ul {
                @for (place, why) in &outcome.refused {
                    li { a href=(record_href(*place)) { (place.to_string()) } ": " (why) }
                }
            }
        }
        @if !outcome.undecodable.is_empty() {
            p { (outcome.undecodable.len()) " could not be decoded: left alone." }
        }
    }
}

fn touched_table(outcome: &Outcome, preview: usize, show_target: bool) -> Markup {
    let more = outcome.touched.len().saturating_sub(preview);
    html! {
        @if !outcome.touched.is_empty() {
            div.table-wrap {
                table #touched {
                    thead { tr {
                        th scope="col" { "Record" }
                        th scope="col" { "Event" }
                        @if show_target { th scope="col" { "Sent to" } }
                    } }
                    tbody {
                        @for (place, event, target) in outcome.touched.iter().take(preview) {
                            tr {
                                td { a href=(record_href(*place)) { (place.to_string()) } }
                                td { @if let Some(id) = event { a href=(event_href(id)) { (id) } } @else { "-" } }
                                @if show_target { td { code { (target.as_deref().unwrap_or("-")) } } }
                            }
                        }
                    }
                }
            }
            @if more > 0 { p.muted { "and " (more) " more." } }
        }
    }
}

/// The action forms (each leads to its confirmation page) for `selector`, described as
/// `what`. Redrive and resolve are left out when `handled_only` says the selection holds
/// handled records only (they would skip them all).
pub fn forms(selector: &Selector, what: &str, handled_only: bool) -> Markup {
    let hidden = html! {
        @for (name, value) in selector.pairs() { input type="hidden" name=(name) value=(value); }
    };
    html! {
        section.panel #actions aria-labelledby="actions-heading" {
            h2 #actions-heading { "Act on " (what) }
            @if handled_only {
                p.muted { "Redriven and resolved records are not redriven or resolved again (as the CLI); notes can still be added." }
            } @else {
                form.actions method="get" action="/dlq/confirm/redrive" #redrive-form {
                    (hidden)
                    div {
                        label for="a-tier" { "Redrive to tier" }
                        input #a-tier type="text" name="tier" placeholder="empty: the main topic; or 5s, 1m";
                    }
                    div {
                        label for="a-rate" { "At most" }
                        input #a-rate type="text" name="rate" placeholder="e.g. 10/s";
                    }
                    button type="submit" #redrive-button { "Redrive…" }
                }
                form.actions method="get" action="/dlq/confirm/resolve" #resolve-form {
                    (hidden)
                    div {
                        label for="a-resolve-note" { "Why it is resolved" }
                        input #a-resolve-note type="text" name="note" required maxlength=(MAX_NOTE_CHARS);
                    }
                    button type="submit" #resolve-button { "Resolve…" }
                }
            }
            form.actions method="get" action="/dlq/confirm/note" #note-form {
                (hidden)
                div {
                    label for="a-ticket" { "Ticket id" }
                    input #a-ticket type="text" name="ticket" placeholder="OPS-123";
                }
                div {
                    label for="a-note" { "Note" }
                    input #a-note type="text" name="note" maxlength=(MAX_NOTE_CHARS);
                }
                button type="submit" #note-button { "Add note…" }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        Params(
            pairs
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn plans_are_checked_as_the_cli_checks_its_flags() {
        let main = Plan::from_params(Kind::Redrive, &params(&[])).expect("main");
        assert!(matches!(
            main,
            Plan::Redrive {
                target: Target::Main,
                rate_per_s: None,
                ..
            }
        ));
        let tier = Plan::from_params(Kind::Redrive, &params(&[("tier", "5s"), ("rate", "120/m")]))
            .expect("tier");
        assert!(
            matches!(tier, Plan::Redrive { target: Target::Tier(_), rate_per_s: Some(r), .. } if r == 2.0)
        );
        assert!(Plan::from_params(Kind::Redrive, &params(&[("tier", "soon")])).is_err());
        assert!(Plan::from_params(Kind::Redrive, &params(&[("rate", "0")])).is_err());
        assert!(Plan::from_params(Kind::Resolve, &params(&[("note", "  ")])).is_err());
        assert!(Plan::from_params(Kind::Note, &params(&[])).is_err());
        let bell = "a\u{7}b";
        assert!(Plan::from_params(Kind::Resolve, &params(&[("note", bell)])).is_err());
        let long = "x".repeat(MAX_NOTE_CHARS + 1);
        assert!(Plan::from_params(Kind::Resolve, &params(&[("note", &long)])).is_err());
        let note = |n: &str, t: &str| {
            Plan::from_params(Kind::Note, &params(&[("note", n), ("ticket", t)]))
                .expect("valid")
                .note()
        };
        assert_eq!(
            note("fixed upstream", "OPS-1").as_deref(),
            Some("ticket OPS-1: fixed upstream")
        );
        assert_eq!(note("", "OPS-1").as_deref(), Some("ticket OPS-1"));
        assert_eq!(note("two\nlines", "").as_deref(), Some("two\nlines"));
        assert_eq!(Kind::parse("discard"), None);
    }
}
