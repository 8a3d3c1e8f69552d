//! Logging in with a token, and out. The login form has a CSRF token of its own (a signed
//! cookie set with the form), so that another site cannot log a browser in either.

use axum::Form;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::cookie::{Cookie, SignedCookieJar};
use hookline_dlq::filter::now_ms;
use maud::html;

use super::Params;
use super::layout::{Nav, page, respond};
use crate::auth::session::{CookieValue, Identity as Via, LOGIN_COOKIE, SESSION_COOKIE};
use crate::auth::{Session, csrf};
use crate::server::AppState;

/// Where to go after logging in: a path of this console only (`/...`, never `//host`).
pub fn safe_next(next: &str) -> &str {
    let ok = next.starts_with('/')
        && !next.starts_with("//")
        && !next.starts_with("/\\")
        && !next.chars().any(|c| c.is_control());
    if ok && next != "/login" { next } else { "/" }
}

/// `GET /login`: the token form (or, for a user already in, where they were going).
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
    (jar, login_page(&state, &token, &next, None, StatusCode::OK)).into_response()
}

/// The login form's CSRF token: the cookie's, or a new one set with the page.
fn login_token(state: &AppState, jar: SignedCookieJar) -> (SignedCookieJar, String) {
    match jar.get(LOGIN_COOKIE) {
        Some(cookie) if !cookie.value().is_empty() => {
            let token = cookie.value().to_owned();
            (jar, token)
        }
        _ => {
            let token = csrf::new_token();
            (jar.add(state.cookie(LOGIN_COOKIE, token.clone())), token)
        }
    }
}

fn login_page(
    state: &AppState,
    token: &str,
    next: &str,
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
                    label for="token" { "Access token" }
                    input #token type="password" name="token" autocomplete="current-password" required autofocus;
                    p { button type="submit" { "Log in" } }
                }
            } @else {
                p { "This console is reached through its reverse proxy, which names the user." }
            }
        }
    };
    respond(status, page(None, "Log in", Nav::None, body))
}

/// `POST /login` (CSRF checked by the server's layer): the token is checked against each
/// user's hash, off the runtime; a match starts a session.
pub async fn submit(
    State(state): State<AppState>,
    jar: SignedCookieJar,
    Form(params): Form<Params>,
) -> Response {
    let next = safe_next(params.get("next")).to_owned();
    let token = params.get("token").to_owned();
    let users = state.settings().users.clone();
    let found = tokio::task::spawn_blocking(move || {
        if token.is_empty() {
            return None;
        }
        // Every hash is checked, so the time taken does not tell which user matched.
        let mut found = None;
        for user in users {
            if user.token_hash.verify(&token) && found.is_none() {
                found = Some(user.name);
            }
        }
        found
    })
    .await
    .ok()
    .flatten();
    let Some(user) = found else {
        tracing::info!("console login refused: no user has this token");
        let (jar, token) = login_token(&state, jar);
        let page = login_page(
            &state,
            &token,
            &next,
            Some("That token is not valid here."),
            StatusCode::UNAUTHORIZED,
        );
        return (jar, page).into_response();
    };
    tracing::info!(user = %user, "console login");
    let lifetime = i64::try_from(state.settings().session_lifetime.as_millis()).unwrap_or(i64::MAX);
    let value = CookieValue::new(&user, Via::Token, now_ms(), lifetime);
    let jar = jar
        .remove(Cookie::build(LOGIN_COOKIE).path("/"))
        .add(state.cookie(SESSION_COOKIE, value.encode()));
    (jar, Redirect::to(&next)).into_response()
}

/// `POST /logout`: the session cookie is removed.
pub async fn logout(jar: SignedCookieJar) -> Response {
    let jar = jar.remove(Cookie::build(SESSION_COOKIE).path("/"));
    (jar, Redirect::to("/login")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

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
