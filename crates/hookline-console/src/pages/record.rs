//! `GET /dlq/records/<partition>/<offset>`: one dead letter: its envelope, the original
//! event decoded through the registry (as `dlq inspect` decodes it), its headers, its
//! operator history, and the actions on it. When payloads are hidden from viewers, so is
//! what may echo one: the error message and the `hookline-last-error` header (both may
//! quote the endpoint's answer).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use hookline_core::headers::LAST_ERROR;
use hookline_core::url_guard::redact_url;
use hookline_dlq::original::original_event;
use hookline_dlq::{ReadOptions, RecordRef, Selected, SelectedItem, Selection, Status};
use maud::{Markup, html};

use super::layout::{Nav, bytes_text, page, respond, status_badge, time};
use super::links::{event_href, sources};
use super::selector::Selector;
use super::{ECHO_HIDDEN, PageError, actions, payloads_hidden, query};
use crate::auth::{Permission, Session};
use crate::state::AppState;

/// `GET /dlq/records/<partition>/<offset>`.
pub async fn show(
    State(state): State<AppState>,
    session: Session,
    Path((partition, offset)): Path<(String, String)>,
) -> Result<Response, PageError> {
    let place: RecordRef = format!("{partition}/{offset}")
        .parse()
        .map_err(|_| PageError::not_found(&session, "not a DLQ record (partition/offset)"))?;
    let selector = Selector::record(&place.to_string());
    let filter = selector
        .filter(0)
        .map_err(|e| PageError::bad_request(&session, e.to_string()))?;
    let dlq_error = |e| PageError::dlq(&session, &e);
    let mut selection = Selection::open(sources(&state), filter, ReadOptions::default(), true)
        .await
        .map_err(dlq_error)?;
    // The first item is the record (reading stops there).
    let item = selection.next().await.map_err(dlq_error)?;
    let title = format!("Dead letter {place}");
    let body = match item {
        None => {
            return Err(PageError::not_found(
                &session,
                format!("no record {place} in {}", selection.topic()),
            ));
        }
        Some(SelectedItem::Undecodable(u)) => html! {
            div.notice.error role="status" {
                p { "This record could not be decoded: " (u.error) }
            }
            dl.fields {
                dt { "Timestamp" } dd { (u.timestamp_ms.map(time).unwrap_or_default()) }
                dt { "Key" } dd { (u.key.as_deref().map(bytes_text).unwrap_or_default()) }
            }
        },
        Some(SelectedItem::Record(selected)) => {
            let hide = payloads_hidden(state.settings(), &session);
            let decoded = if hide {
                None
            } else {
                original_event(
                    &state.context().registry,
                    &selected.record.envelope.original_payload_bytes,
                )
                .await
            };
            record_body(&session, &selected, hide, decoded.as_ref())
        }
    };
    Ok(respond(
        StatusCode::OK,
        page(Some(&session), &title, Nav::Dlq, body),
    ))
}

/// The record's page body. `hide` leaves the payload out, and what may echo it; `decoded`
/// is the original event read through the registry, when it is Avro.
pub fn record_body(
    session: &Session,
    selected: &Selected,
    hide: bool,
    decoded: Option<&serde_json::Value>,
) -> Markup {
    let r = &selected.record;
    let e = &r.envelope;
    let status = selected.status();
    let place = r.place().to_string();
    html! {
        p.actions {
            (status_badge(status))
            a href=(event_href(&e.event_id)) #event-link { "Event history" }
            a href={ "/dlq?" (query(&[("event_id", &e.event_id), ("status", "all")])) } { "All dead letters of this event" }
        }
        section aria-labelledby="envelope-heading" {
            h2 #envelope-heading { "Envelope" }
            dl.fields #envelope {
                dt { "Event id" } dd { code { (e.event_id) } }
                dt { "Event type" } dd { (e.event_type.as_deref().unwrap_or("-")) }
                dt { "Endpoint" } dd { (e.endpoint_id.as_deref().unwrap_or("-")) }
                dt { "Tenant" } dd { (e.tenant_id.as_deref().unwrap_or("-")) }
                dt { "Endpoint URL" } dd { (e.endpoint_url.as_deref().map(redact_url).unwrap_or_else(|| "-".into())) }
                dt { "Reason" } dd { code { (e.error_reason.code()) } }
                dt { "Error" } dd #error-message { (if hide { ECHO_HIDDEN } else { &e.error_message }) }
                dt { "Last HTTP status" } dd { (e.last_status_code.map(|s| s.to_string()).unwrap_or_else(|| "-".into())) }
                dt { "Attempts" } dd { (e.attempts) }
                dt { "First attempt" } dd { (e.first_attempt_at_ms.map(time).unwrap_or_else(|| "-".into())) }
                dt { "Parked at" } dd { (time(e.error_timestamp_ms)) }
                dt { "Dispatcher" } dd { (e.dispatcher_id) }
                dt { "Original record" } dd { code { (e.original_topic) "/" (e.original_partition) "/" (e.original_offset) } }
                dt { "DLQ record" } dd { code { (place) } @if let Some(ms) = r.timestamp_ms { " at " (time(ms)) } }
                dt { "Envelope version" } dd { (e.envelope_version) }
                @if e.original_payload_truncated {
                    dt { "Payload" } dd { "truncated to fit the DLQ (" (e.original_payload_bytes.len())
                        @if let Some(size) = e.original_payload_size { " of " (size) } " bytes kept): it cannot be redriven" }
                }
            }
        }
        section aria-labelledby="event-heading" {
            h2 #event-heading { "Original event" }
            @if hide {
                p.muted #payload-hidden { "Hidden from viewers: payloads may hold personal data (console.hide_payloads_from_viewer)." }
            } @else if let Some(event) = decoded {
                p.muted { "Decoded through the schema registry." }
                pre #payload { (serde_json::to_string_pretty(event).unwrap_or_default()) }
            } @else {
                pre #payload { (payload_text(&e.original_payload_bytes)) }
            }
        }
        section aria-labelledby="headers-heading" {
            h2 #headers-heading { "Headers" }
            (headers_table("Original headers", e.original_headers.iter().map(|h| (h.key.as_str(), h.value.as_deref()))))
            (headers_table("DLQ record headers", r.headers.iter().map(|(k, v)| {
                let echo = hide && k == LAST_ERROR;
                (k.as_str(), if echo { Some(ECHO_HIDDEN.as_bytes()) } else { v.as_deref() })
            })))
        }
        section aria-labelledby="history-heading" {
            h2 #history-heading { "Operator history" }
            @if selected.history.0.is_empty() {
                p.muted #no-history { "No operator action yet." }
            } @else {
                div.table-wrap {
                    table #history {
                        thead { tr {
                            th scope="col" { "At" } th scope="col" { "Action" } th scope="col" { "By" }
                            th scope="col" { "Role" } th scope="col" { "Note" } th scope="col" { "Sent to" }
                        } }
                        tbody {
                            @for a in &selected.history.0 {
                                tr {
                                    td { (a.at) }
                                    td { (a.action.as_str()) }
                                    td { (a.by) }
                                    td { (a.role.as_deref().unwrap_or("-")) }
                                    td.wrap { (a.note.as_deref().unwrap_or("")) }
                                    td { code { (a.target.as_deref().unwrap_or("")) } }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if session.role.allows(Permission::Act) {
            (actions::forms(&Selector::record(&place), "this record", status != Status::Open))
        }
    }
}

/// A payload for people: JSON pretty-printed, other UTF-8 as is, bytes by their size.
fn payload_text(bytes: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(json) => serde_json::to_string_pretty(&json).unwrap_or_else(|_| bytes_text(bytes)),
        Err(_) => bytes_text(bytes),
    }
}

fn headers_table<'a>(
    title: &str,
    headers: impl Iterator<Item = (&'a str, Option<&'a [u8]>)>,
) -> Markup {
    let rows: Vec<_> = headers.collect();
    html! {
        h3 { (title) }
        @if rows.is_empty() {
            p.muted { "None." }
        } @else {
            div.table-wrap {
                table {
                    thead { tr { th scope="col" { "Name" } th scope="col" { "Value" } } }
                    tbody {
                        @for (name, value) in rows {
                            tr { td { code { (name) } } td.wrap { code { (value.map(bytes_text).unwrap_or_else(|| "(null)".into())) } } }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use hookline_core::envelope::{DlqEnvelope, DlqHeader, ENVELOPE_VERSION, ErrorReason};
    use hookline_dlq::{Action, ActionKind, DlqRecord, History};

    use super::*;
    use crate::auth::{Identity, Role};

    fn session(role: Role) -> Session {
        Session {
            user: "u".into(),
            role,
            csrf: "c".into(),
            identity: Identity::Token,
        }
    }

    fn selected() -> Selected {
        Selected {
            record: DlqRecord {
                partition: 0,
                offset: 4,
                timestamp_ms: Some(1_000),
                key: Some(b"ep".to_vec()),
                headers: vec![("webhook-id".into(), Some(b"evt-1".to_vec()))],
                envelope: DlqEnvelope {
                    envelope_version: ENVELOPE_VERSION,
                    event_id: "evt-1".into(),
                    event_type: Some("invoice.paid".into()),
                    endpoint_id: Some("ep".into()),
                    endpoint_url: Some("https://user:hunter2@example.com/hook?token=s3cr3t".into()),
                    original_topic: "ev".into(),
                    original_partition: 1,
                    original_offset: 2,
                    original_key: Some(b"ep".to_vec()),
                    original_payload_bytes: br#"{"email":"jane@example.com"}"#.to_vec(),
                    original_headers: vec![DlqHeader {
                        key: "traceparent".into(),
                        value: None,
                    }],
                    error_reason: ErrorReason::RetriesExhausted,
                    error_message: "HTTP 503 <b>down</b>".into(),
                    last_status_code: Some(503),
                    attempts: 3,
                    first_attempt_at_ms: Some(500),
                    error_timestamp_ms: 1_000,
                    dispatcher_id: "d-1".into(),
                    original_payload_truncated: false,
                    original_payload_size: None,
                    tenant_id: Some("acme".into()),
                },
            },
            history: History(vec![Action {
                note: Some("ticket OPS-9".into()),
                role: Some("operator".into()),
                ..Action::new(ActionKind::Note, 900, "alice")
            }]),
        }
    }

    #[test]
    fn the_url_is_redacted_html_escaped_and_the_history_names_the_role() {
        let html = record_body(&session(Role::Operator), &selected(), false, None).into_string();
        assert!(
            !html.contains("hunter2") && !html.contains("s3cr3t"),
            "{html}"
        );
        assert!(html.contains("https://example.com/hook?redacted"), "{html}");
        assert!(html.contains("HTTP 503 &lt;b&gt;down&lt;/b&gt;"));
        assert!(
            html.contains("jane@example.com"),
            "operators see the payload"
        );
        assert!(html.contains("<td>operator</td>") && html.contains("ticket OPS-9"));
        assert!(html.contains("redrive-button") && html.contains("resolve-button"));
    }

    #[test]
    fn viewers_see_no_payload_when_hidden_and_no_action_button() {
        let mut echoed = selected();
        let echo = r#"HTTP 503: {"email":"jane@example.com"}"#;
        echoed.record.envelope.error_message = echo.into();
        echoed
            .record
            .headers
            .push((LAST_ERROR.into(), Some(echo.as_bytes().to_vec())));
        let html = record_body(&session(Role::Viewer), &echoed, true, None).into_string();
        assert!(!html.contains("jane@example.com"), "{html}");
        assert_eq!(html.matches(ECHO_HIDDEN).count(), 2, "{html}");
        let operator = record_body(&session(Role::Operator), &echoed, false, None).into_string();
        assert_eq!(
            operator.matches("jane@example.com").count(),
            3,
            "{operator}"
        );
        assert!(html.contains("payload-hidden"));
        for button in [
            "redrive-button",
            "resolve-button",
            "note-button",
            "/dlq/confirm/",
        ] {
            assert!(!html.contains(button), "{button} shown to a viewer");
        }
        let shown = record_body(&session(Role::Viewer), &selected(), false, None).into_string();
        assert!(
            shown.contains("jane@example.com"),
            "unless payloads are shown to viewers"
        );
    }

    #[test]
    fn a_handled_record_offers_a_note_only() {
        let mut s = selected();
        s.history
            .0
            .push(Action::new(ActionKind::Resolved, 950, "bob"));
        let html = record_body(&session(Role::Admin), &s, false, None).into_string();
        assert!(html.contains("note-button"));
        assert!(!html.contains("redrive-button") && !html.contains("resolve-button"));
    }
}
