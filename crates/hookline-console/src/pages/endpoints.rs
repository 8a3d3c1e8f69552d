//! `GET /endpoints?tenant=`: the endpoint table by tenant (URL redacted, enabled or
//! disabled with why), each endpoint's health below it ([`crate::insight`]: success ratio,
//! latency, last error, circuit), and the admin's enable and disable, each confirmed
//! (`GET /endpoints/confirm`), then posted (`POST /endpoints/act`, CSRF checked by the
//! server) through the same library calls as `hookline endpoints enable|disable`. A disable
//! records who did it in the endpoint's reason (`manual by NAME (ROLE): TEXT`); both are
//! logged with the user and role.

use std::collections::BTreeMap;

use axum::Form;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use hookline_core::endpoint::EndpointConfig;
use hookline_core::url_guard::redact_url;
use hookline_producer::endpoints::{self, SwitchError};
use maud::{Markup, html};

use crate::insight::view::endpoints_page;

use super::layout::{Nav, csrf_field, page, respond, time};
use super::{PageError, Params, error_chain, payloads_hidden, query, require};
use crate::auth::{Permission, Session};
use crate::state::AppState;

/// The tenant filter's value for endpoints without a tenant.
pub const NO_TENANT: &str = "-";

/// `GET /endpoints?tenant=`.
pub async fn list(
    State(state): State<AppState>,
    session: Session,
    Query(params): Query<Params>,
) -> Result<Response, PageError> {
    let table = state
        .endpoints()
        .list()
        .await
        .map_err(|e| store_error(&session, &e))?;
    let tenant = params.get("tenant");
    let mut tenants: BTreeMap<&str, usize> = BTreeMap::new();
    for config in table.endpoints.values() {
        *tenants
            .entry(config.tenant.as_deref().unwrap_or(NO_TENANT))
            .or_default() += 1;
    }
    let shown: Vec<(&String, &EndpointConfig)> = table
        .endpoints
        .iter()
        .filter(|(_, c)| tenant.is_empty() || c.tenant.as_deref().unwrap_or(NO_TENANT) == tenant)
        .collect();
    let admin = session.role.allows(Permission::ManageEndpoints);
    // Success ratio, latency and last error from the attempt log, circuits from the
    // dispatchers; the table above stays usable when Kafka's attempt log cannot be read.
    let health = match state
        .insight()
        .endpoints((!tenant.is_empty() && tenant != NO_TENANT).then_some(tenant))
        .await
    {
        Ok(page) => endpoints_page(
            &page,
            payloads_hidden(state.settings(), &session),
            |_| html! {},
        ),
        Err(error) => html! {
            div.notice.error role="status" { p { "Endpoint health could not be read: " (error_chain(&error)) } }
        },
    };
    let title = if tenant.is_empty() {
        "Endpoints".to_owned()
    } else {
        format!("Endpoints of {tenant}")
    };
    let body = html! {
        nav.panel aria-label="Tenants" {
            span.muted { "Tenant: " }
            a href="/endpoints" aria-current=[tenant.is_empty().then_some("page")] { "all (" (table.endpoints.len()) ")" }
            @for (name, count) in &tenants {
                " · "
                a href={ "/endpoints?" (query(&[("tenant", name)])) } aria-current=[(*name == tenant).then_some("page")] {
                    (if *name == NO_TENANT { "no tenant" } else { name }) " (" (count) ")"
                }
            }
        }
        @if !table.unreadable.is_empty() {
            div.notice.error role="status" {
                p { "Endpoints with an invalid config: " }
                ul { @for (id, why) in &table.unreadable { li { code { (id) } ": " (why) } } }
            }
        }
        (endpoints_table(&shown, admin))
        (health)
    };
    Ok(respond(
        StatusCode::OK,
        page(Some(&session), &title, Nav::Endpoints, body),
    ))
}

/// An endpoint's state: enabled, or disabled with why and since when.
pub fn state_markup(config: &EndpointConfig) -> Markup {
    html! {
        @if config.enabled {
            span.badge.enabled { "enabled" }
        } @else {
            span.badge.disabled { "disabled" }
            @if let Some(reason) = &config.disabled_reason { " " (reason) }
            @if let Some(at) = config.disabled_at_ms { " since " (time(at)) }
        }
    }
}

fn endpoints_table(shown: &[(&String, &EndpointConfig)], admin: bool) -> Markup {
    html! {
        @if shown.is_empty() {
            p.muted #no-endpoints { "No endpoints here." }
        } @else {
            div.table-wrap {
                table #endpoints {
                    thead { tr {
                        th scope="col" { "Endpoint" } th scope="col" { "Tenant" } th scope="col" { "URL" }
                        th scope="col" { "State" } th scope="col" { "Event types" }
                        th scope="col" { "Dead letters" }
                        @if admin { th scope="col" { "Action" } }
                    } }
                    tbody {
                        @for (id, config) in shown {
                            tr data-endpoint=(id) {
                                td { code { (id) } @if let Some(d) = &config.description { br; span.muted { (d) } } }
                                td { (config.tenant.as_deref().unwrap_or("-")) }
                                td.wrap { code { (redact_url(&config.url)) } }
                                td { (state_markup(config)) }
                                td { (if config.event_types.is_empty() { "*".to_owned() } else { config.event_types.join(", ") }) }
                                td { a href={ "/dlq?" (query(&[("endpoint", id)])) } { "open" } }
                                @if admin {
                                    td {
                                        form method="get" action="/endpoints/confirm" {
                                            input type="hidden" name="id" value=(id);
                                            @if config.enabled {
                                                input type="hidden" name="op" value="disable";
                                                button.danger type="submit" id={ "disable-" (id) } { "Disable…" }
                                            } @else {
                                                input type="hidden" name="op" value="enable";
                                                button type="submit" id={ "enable-" (id) } { "Enable…" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn store_error(session: &Session, error: &dyn std::error::Error) -> PageError {
    PageError {
        status: StatusCode::BAD_GATEWAY,
        title: "The endpoint table could not be read or written",
        message: error_chain(error),
        session: Some(session.clone()),
    }
}

/// Which change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Enable,
    Disable,
}

fn op(session: &Session, params: &Params) -> Result<(String, Op), PageError> {
    require(session, Permission::ManageEndpoints)?;
    let id = params.get("id");
    if id.is_empty() {
        return Err(PageError::bad_request(session, "which endpoint?"));
    }
    let op = match params.get("op") {
        "enable" => Op::Enable,
        "disable" => Op::Disable,
        _ => return Err(PageError::bad_request(session, "op is enable or disable")),
    };
    Ok((id.to_owned(), op))
}

/// `GET /endpoints/confirm?id=&op=enable|disable`.
pub async fn confirm(
    State(state): State<AppState>,
    session: Session,
    Query(params): Query<Params>,
) -> Result<Response, PageError> {
    let (id, op) = op(&session, &params)?;
    let config = state
        .endpoints()
        .get(&id)
        .await
        .map_err(|e| store_error(&session, &e))?
        .ok_or_else(|| PageError::not_found(&session, format!("no endpoint {id}")))?;
    let verb = if op == Op::Enable {
        "Enable"
    } else {
        "Disable"
    };
    let body = html! {
        dl.fields {
            dt { "Endpoint" } dd { code { (id) } }
            dt { "URL" } dd { code { (redact_url(&config.url)) } }
            dt { "State" } dd { (state_markup(&config)) }
        }
        div.notice role="status" #confirm-summary {
            @if op == Op::Enable {
                p { "Deliveries to it resume. What was parked meanwhile (reason endpoint_disabled) stays in the DLQ: "
                    a href={ "/dlq?" (query(&[("endpoint", &id), ("reason", "endpoint_disabled")])) } { "redrive it" } " afterwards." }
            } @else {
                p { "Its deliveries are parked in the DLQ (reason endpoint_disabled) until it is enabled again." }
            }
        }
        form.panel method="post" action="/endpoints/act" #confirm-form {
            (csrf_field(&session))
            input type="hidden" name="id" value=(id);
            input type="hidden" name="op" value=(if op == Op::Enable { "enable" } else { "disable" });
            @if op == Op::Disable {
                label for="reason" { "Why (kept with the endpoint)" }
                input #reason type="text" name="reason" maxlength="200";
            }
            p.actions {
                button type="submit" #confirm-button class=[(op == Op::Disable).then_some("danger")] { "Yes, " (verb.to_lowercase()) " " (id) }
                a.button.secondary href="/endpoints" { "Cancel" }
            }
        }
    };
    Ok(respond(
        StatusCode::OK,
        page(
            Some(&session),
            &format!("{verb} endpoint {id}?"),
            Nav::Endpoints,
            body,
        ),
    ))
}

/// `POST /endpoints/act`.
pub async fn act(
    State(state): State<AppState>,
    session: Session,
    Form(params): Form<Params>,
) -> Result<Response, PageError> {
    let (id, op) = op(&session, &params)?;
    let store = state.endpoints();
    let failed = |e: SwitchError| match e {
        SwitchError::NotFound { .. } => PageError::not_found(&session, e.to_string()),
        SwitchError::Changed { .. } | SwitchError::InvalidReason { .. } => {
            PageError::bad_request(&session, e.to_string())
        }
        SwitchError::Store { ref source, .. } => store_error(&session, source.as_ref()),
    };
    let message = match op {
        Op::Enable => {
            let switched = endpoints::enable(store, &id).await.map_err(failed)?;
            if switched.written {
                format!("Enabled endpoint {id}.")
            } else {
                format!("Endpoint {id} was enabled already; nothing changed.")
            }
        }
        Op::Disable => {
            let text = params.get("reason");
            let by = format!("{} ({})", session.user, session.role.as_str());
            let text = (!text.is_empty()).then_some(text);
            let switched = endpoints::disable(store, &id, text, Some(&by))
                .await
                .map_err(failed)?;
            format!(
                "Disabled endpoint {id}: {}.",
                switched.config.disabled_reason.unwrap_or_default()
            )
        }
    };
    tracing::info!(
        user = %session.user,
        role = session.role.as_str(),
        endpoint = %id,
        action = if op == Op::Enable { "enable" } else { "disable" },
        "console endpoint action"
    );
    let body = html! {
        div.notice.ok role="status" #result-summary { p { (message) } }
        p { a href="/endpoints" { "Back to the endpoints" } }
    };
    Ok(respond(
        StatusCode::OK,
        page(Some(&session), "Done", Nav::Endpoints, body),
    ))
}
