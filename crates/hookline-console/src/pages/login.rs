//! Logging in with a user name and token, and out. The login form has a CSRF token of its
//! own (a signed cookie set with the form), so that another site cannot log a browser in
//! either. Each login goes through the [`LoginGate`](crate::auth::LoginGate): one token
//! check, a few at once, none for an address that failed too often. Logging out revokes
//! the session, so that a copy of its cookie is refused too.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::Form;
use axum::extract::{ConnectInfo, FromRequestParts, Query, State};
use axum::http::StatusCode;
use axum::http::header::RETRY_AFTER;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::cookie::SignedCookieJar;
use hookline_dlq::filter::now_ms;
use maud::html;

use super::Params;
use super::layout::{Nav, page, respond};
use crate::auth::session::{CookieValue, Identity as Via};
use crate::auth::{Refusal, Session, csrf};
use crate::state::AppState;

/// Where to go after logging in: a path of this console only (`/...`, never `//host`).
pub fn safe_next(next: &str) -> &str {
    let ok = next.starts_with('/')
        && !next.starts_with("//")
        && !next.starts_with("/\\")
        && !next.chars().any(|c| c.is_control());
    if ok && next != "/login" { next } else { "/" }
}

/// The address a request came from, as the connection tells it; all requests share one
/// (`0.0.0.0`) when the router is served without it.
pub struct ClientAddr(pub IpAddr);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>();
        Ok(ClientAddr(
            peer.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip()),
        ))
    }
}

/// `GET /login`: the login form (or, for a user already in, where they were going).
pub async fn form(
    State(state): State<AppState>,
    session: Option<Session>,
    jar: SignedCookieJar,
    Query(params): Query<Params>,
) -> Response {
    let next = safe_next(params.get("next")).to_owned();
    if session.is_some() {
        return Redirect::to(&next).into_response();
    }
    let (jar, token) = login_token(&state, jar);
    let page = login_page(&state, &token, &next, "", None, StatusCode::OK);
    (jar, page).into_response()
}

/// The login form's CSRF token: the cookie's, or a new one set with the page.
fn login_token(state: &AppState, jar: SignedCookieJar) -> (SignedCookieJar, String) {
    let name = state.cookie_names().login;
    match jar.get(name) {
        Some(cookie) if !cookie.value().is_empty() => {
            let token = cookie.value().to_owned();
            (jar, token)
        }
        _ => {
            let token = csrf::new_token();
            (jar.add(state.cookie(name, token.clone())), token)
        }
    }
}

fn login_page(
    state: &AppState,
    token: &str,
    next: &str,
    user: &str,
    error: Option<&str>,
    status: StatusCode,
) -> Response {
    let has_users = !state.settings().users.is_empty();
    let body = html! {
        div.login {
            @if let Some(error) = error {
                div.notice.error role="alert" #login-error { p { (error) } }
            }
            @if has_users {
                form.panel #login-form method="post" action="/login" {
                    input type="hidden" name=(csrf::FIELD) value=(token);
                    input type="hidden" name="next" value=(next);
                    label for="user" { "User name" }
                    input #user type="text" name="user" value=(user) autocomplete="username"
                        autocapitalize="none" spellcheck="false" required autofocus[user.is_empty()];
                    label for="token" { "Access token" }
                    input #token type="password" name="token" autocomplete="current-password"
                        required autofocus[!user.is_empty()];
                    p { button type="submit" { "Log in" } }
                }
            } @else {
                p { "This console is reached through its reverse proxy, which names the user." }
            }
        }
    };
    respond(status, page(None, "Log in", Nav::None, body))
}

/// `POST /login` (CSRF checked by the server's layer): the user's token is checked through
/// the login gate; a match starts a session.
pub async fn submit(
    State(state): State<AppState>,
    ClientAddr(client): ClientAddr,
    jar: SignedCookieJar,
    Form(params): Form<Params>,
) -> Response {
    let next = safe_next(params.get("next")).to_owned();
    let user = params.get("user").to_owned();
    let checked = state
        .login_gate()
        .check(client, &user, params.get("token"))
        .await;
    let refused = |jar, message: &str, status, retry_after: Option<Duration>| {
        let (jar, token) = login_token(&state, jar);
        let page = login_page(&state, &token, &next, &user, Some(message), status);
        let retry_after = retry_after.map(|wait| [(RETRY_AFTER, seconds(wait).to_string())]);
        (jar, retry_after, page).into_response()
    };
    let found = match checked {
        Ok(found) => found,
        Err(Refusal::Busy) => {
            tracing::warn!(%client, "console login refused: every token check is busy");
            let message = "The console is busy checking other logins: try again in a moment.";
            return refused(
                jar,
                message,
                StatusCode::SERVICE_UNAVAILABLE,
                Some(Duration::from_secs(1)),
            );
        }
        Err(Refusal::Backoff(wait)) => {
            tracing::warn!(%client, "console login refused: too many failed logins");
            let message = format!(
                "Too many failed logins from your address: try again in {} seconds.",
                seconds(wait)
            );
            return refused(jar, &message, StatusCode::TOO_MANY_REQUESTS, Some(wait));
        }
    };
    let Some(user) = found else {
        tracing::info!(%client, "console login refused: wrong user name or token");
        let message = "That user name and token are not valid here.";
        return refused(jar, message, StatusCode::UNAUTHORIZED, None);
    };
    tracing::info!(user = %user, "console login");
    let lifetime = i64::try_from(state.settings().session_lifetime.as_millis()).unwrap_or(i64::MAX);
    let value = CookieValue::new(&user, Via::Token, now_ms(), lifetime);
    let names = state.cookie_names();
    let jar = jar
        .remove(state.removal(names.login))
        .add(state.cookie(names.session, value.encode()));
    (jar, Redirect::to(&next)).into_response()
}

/// `wait` in whole seconds, rounded up: never 0, which would invite a retry at once.
fn seconds(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

/// `POST /logout` (CSRF checked by the server's layer): the session is revoked, so that its
/// cookie is refused even if a copy was kept, and the browser is told to drop it.
pub async fn logout(State(state): State<AppState>, jar: SignedCookieJar) -> Response {
    let name = state.cookie_names().session;
    if let Some(value) = jar.get(name).and_then(|c| CookieValue::decode(c.value())) {
        state.revoked().revoke(&value, now_ms());
        tracing::info!(user = %value.user, "console logout");
    }
    let jar = jar.remove(state.removal(name));
    (jar, Redirect::to("/login")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_and_never_zero() {
        assert_eq!(seconds(Duration::ZERO), 1);
        assert_eq!(seconds(Duration::from_millis(1)), 1);
        assert_eq!(seconds(Duration::from_secs(1)), 1);
        assert_eq!(seconds(Duration::from_millis(299_001)), 300);
    }

    #[test]
    fn only_local_paths_are_followed_after_login() {
        assert_eq!(safe_next("/dlq?reason=x"), "/dlq?reason=x");
        for bad in [
            "",
            "https://evil.example/",
            "//evil.example",
            "/\\evil",
            "dlq",
            "/login",
            "/a\nb",
        ] {
            assert_eq!(safe_next(bad), "/", "{bad:?}");
        }
    }
}
