//! The page shell (navigation, the user and log-out), error pages, the stylesheet, and
//! small pieces every page uses (times, status badges, hidden CSRF fields).

use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use hookline_dlq::Status;
use hookline_dlq::filter::format_ms;
use maud::{DOCTYPE, Markup, html};

use crate::auth::{Session, csrf};

const STYLESHEET: &str = include_str!("../assets/console.css");

/// Which part of the console a page belongs to (marked in the navigation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nav {
    /// Deliveries, DLQ inflow, lag, circuits.
    Overview,
    /// The DLQ list and records.
    Dlq,
    /// Endpoints by tenant.
    Endpoints,
    /// One event's history.
    Events,
    /// None (login, errors).
    None,
}

/// The navigation's links, in order.
pub(crate) const NAV_LINKS: &[(Nav, &str, &str)] = &[
    (Nav::Overview, "/overview", "Overview"),
    (Nav::Dlq, "/dlq", "DLQ"),
    (Nav::Endpoints, "/endpoints", "Endpoints"),
    (Nav::Events, "/events", "Events"),
];

/// A whole page: the shell around `body`, with `title` as its heading.
pub fn page(session: Option<&Session>, title: &str, current: Nav, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · hookline console" }
                link rel="stylesheet" href="/static/console.css";
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/" { "hookline console" }
                    @if let Some(session) = session {
                        nav aria-label="Main" {
                            ul {
                                @for (nav, href, label) in NAV_LINKS {
                                    li {
                                        a href=(href) aria-current=[(*nav == current).then_some("page")] { (label) }
                                    }
                                }
                            }
                        }
                        form.search method="get" action="/events" role="search" {
                            label.visually-hidden for="event-search" { "Event id" }
                            input #event-search type="search" name="id" placeholder="Event id" autocomplete="off";
                            button.secondary type="submit" { "Show event" }
                        }
                        div.user {
                            span #whoami { (session.user) " · " (session.role.as_str()) }
                            form method="post" action="/logout" {
                                (csrf_field(session))
                                button.link type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main #main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// A page as a response with `status`.
pub fn respond(status: StatusCode, markup: Markup) -> Response {
    (status, markup).into_response()
}

/// An error page: `status`, a heading and what to do.
pub fn error_page(
    session: Option<&Session>,
    status: StatusCode,
    title: &str,
    message: &str,
) -> Response {
    let body = html! {
        div.notice.error role="alert" { p { (message) } }
        p { a href="/" { "Back to the console" } }
    };
    respond(status, page(session, title, Nav::None, body))
}

/// The hidden field that carries the session's CSRF token in a form.
pub fn csrf_field(session: &Session) -> Markup {
    html! { input type="hidden" name=(csrf::FIELD) value=(session.csrf); }
}

/// `2024-05-01 12:00:00.123 UTC`.
pub fn time(ms: i64) -> String {
    format!(
        "{} UTC",
        format_ms(ms).replace('T', " ").trim_end_matches('Z')
    )
}

/// A record's status as a badge.
pub fn status_badge(status: Status) -> Markup {
    let class = status.as_str();
    html! { span class={ "badge " (class) } { (status.as_str()) } }
}

/// The stylesheet (vendored into the binary).
pub async fn stylesheet() -> Response {
    (
        [
            (CONTENT_TYPE, "text/css; charset=utf-8"),
            (CACHE_CONTROL, "max-age=3600"),
        ],
        STYLESHEET,
    )
        .into_response()
}

/// Text shown for bytes: UTF-8 as is (escaped by the template), else their size.
pub fn bytes_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => format!("<{} bytes, not UTF-8>", bytes.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Identity, Role};

    #[test]
    fn the_shell_escapes_and_carries_the_csrf_token() {
        let session = Session {
            user: "<script>alert(1)</script>".into(),
            role: Role::Viewer,
            csrf: "abc123".into(),
            identity: Identity::Token,
        };
        let html = page(Some(&session), "DLQ & more", Nav::Dlq, html! {}).into_string();
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("DLQ &amp; more"));
        assert!(html.contains(r#"name="csrf" value="abc123""#));
        assert!(
            html.contains(r#"href="/dlq" aria-current="page""#),
            "{html}"
        );
        let anonymous = page(None, "Log in", Nav::None, html! {}).into_string();
        assert!(!anonymous.contains("Log out"));
    }

    #[test]
    fn times_and_bytes_read_well() {
        assert_eq!(time(1_714_564_800_123), "2024-05-01 12:00:00.123 UTC");
        assert_eq!(bytes_text(b"{\"a\":1}"), "{\"a\":1}");
        assert_eq!(bytes_text(&[0xff, 0x00]), "<2 bytes, not UTF-8>");
    }
}
