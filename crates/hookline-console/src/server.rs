//! The HTTP server: routes, and the layers every request goes through (who is asking, revoked sessions refused, CSRF on every POST, security
//! headers).

use std::net::SocketAddr;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{FromRequestParts, OptionalFromRequestParts, Request, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum_extra::extract::cookie::SignedCookieJar;
use hookline_dlq::filter::now_ms;
use tokio_util::sync::CancellationToken;

use crate::auth::session::{CookieValue, Resolved, resolve};
use crate::auth::{Session, csrf};
use crate::config::ConsoleSettings;
use crate::error::{ConsoleError, Result};
use crate::pages;
use crate::state::{AppState, ConsoleContext};

/// The most bytes of a form body read (a note, a selection).
const MAX_FORM_BYTES: usize = 64 * 1024;

/// The page's policy: everything from the console itself, no inline script or style, no
/// framing, forms posting only back to it.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The console's routes and layers.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(pages::home))
        .route("/login", get(pages::login::form).post(pages::login::submit))
        .route("/logout", post(pages::login::logout))
        .route("/static/console.css", get(pages::layout::stylesheet))
        .route("/dlq", get(pages::dlq::list))
        .route(
            "/dlq/records/{partition}/{offset}",
            get(pages::record::show),
        )
        .route("/dlq/confirm/archive", get(pages::archive::confirm))
        .route("/dlq/act/archive", post(pages::archive::act))
        .route("/dlq/confirm/{action}", get(pages::actions::confirm))
        .route("/dlq/act/{action}", post(pages::actions::act))
        .route("/events", get(pages::event::show))
        .route("/overview", get(pages::overview::show))
        .route("/endpoints", get(pages::endpoints::list))
        .route("/endpoints/confirm", get(pages::endpoints::confirm))
        .route("/endpoints/act", post(pages::endpoints::act))
        .fallback(pages::not_found)
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(middleware::from_fn(security_headers))
        .with_state(state)
}

/// Serves the console on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: tokio::net::TcpListener,
    settings: ConsoleSettings,
    context: ConsoleContext,
    shutdown: CancellationToken,
) -> Result<()> {
    if settings.secure_cookies {
        tracing::info!(
            "console cookies are Secure (__Host-): reach the console over HTTPS, or listen on \
             loopback"
        );
    }
    let app = router(AppState::new(settings, context)?);
    // The peer's address, for the login's back-off.
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .map_err(ConsoleError::Serve)
}

/// Binds `addr` (e.g. `127.0.0.1:8088`).
pub async fn bind(addr: &str) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ConsoleError::Bind {
            addr: addr.to_owned(),
            source,
        })
}

/// Who is asking (the session unless it was revoked, or the trusted header), then CSRF on
/// every POST: the session's token (the login form's own before there is a session) in the
/// `csrf` field or the `X-CSRF-Token` header, else 403. A new session's cookie is set on
/// the response.
async fn authenticate(
    State(state): State<AppState>,
    jar: SignedCookieJar,
    request: Request,
    next: Next,
) -> Response {
    let names = state.cookie_names();
    let cookie = jar
        .get(names.session)
        .and_then(|c| CookieValue::decode(c.value()))
        .filter(|c| !state.revoked().contains(c));
    let (session, new_cookie) = match resolve(state.settings(), cookie, request.headers(), now_ms())
    {
        Resolved::User(session, new) => (Some(session), new),
        Resolved::Anonymous => (None, None),
        Resolved::Refused(reason) => {
            return pages::layout::error_page(None, StatusCode::FORBIDDEN, "Not allowed", &reason);
        }
    };
    let mut request = request;
    if request.method() == Method::POST {
        let expected = if request.uri().path() == "/login" {
            jar.get(names.login).map(|c| c.value().to_owned())
        } else {
            session.as_ref().map(|s| s.csrf.clone())
        };
        request = match checked(request, expected.as_deref()).await {
            Ok(request) => request,
            Err(response) => return response,
        };
    }
    if let Some(session) = &session {
        request.extensions_mut().insert(session.clone());
    }
    let response = next.run(request).await;
    match new_cookie {
        Some(value) => (
            jar.add(state.cookie(names.session, value.encode())),
            response,
        )
            .into_response(),
        None => response,
    }
}

/// The request with its body read back in, when its CSRF token is `expected`; a 403 page
/// otherwise.
async fn checked(
    request: Request,
    expected: Option<&str>,
) -> std::result::Result<Request, Response> {
    let refused = |why: &str| {
        pages::layout::error_page(
            None,
            StatusCode::FORBIDDEN,
            "Refused",
            &format!("{why}: reload the page and try again."),
        )
    };
    let Some(expected) = expected else {
        return Err(refused("no session to check this form against"));
    };
    let header = request
        .headers()
        .get(csrf::HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (parts, body) = request.into_parts();
    let bytes = to_bytes(body, MAX_FORM_BYTES)
        .await
        .map_err(|_| refused("the form is too large"))?;
    let field = url::form_urlencoded::parse(&bytes)
        .find(|(name, _)| name == csrf::FIELD)
        .map(|(_, value)| value.into_owned());
    if !csrf::matches(expected, header.as_deref().or(field.as_deref())) {
        return Err(refused("the form's CSRF token is missing or wrong"));
    }
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// Headers on every response: the content security policy, no sniffing, no framing, no
/// referrer, and no caching of pages (they show live data and the CSRF token).
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-security-policy", CONTENT_SECURITY_POLICY),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    let is_css = headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/css"));
    if !is_css {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// The session of a page that needs one: a GET without one is sent to the login page
/// (and back after it), anything else is refused.
impl<S: Send + Sync> FromRequestParts<S> for Session {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &S,
    ) -> std::result::Result<Self, Self::Rejection> {
        if let Some(session) = parts.extensions.get::<Session>() {
            return Ok(session.clone());
        }
        if parts.method == Method::GET {
            let next = parts
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_owned();
            let query: String = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("next", &next)
                .finish();
            return Err(Redirect::to(&format!("/login?{query}")).into_response());
        }
        Err(pages::layout::error_page(
            None,
            StatusCode::FORBIDDEN,
            "Refused",
            "log in first",
        ))
    }
}

/// The session when there is one (the login page, pages that also serve visitors).
impl<S: Send + Sync> OptionalFromRequestParts<S> for Session {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &S,
    ) -> std::result::Result<Option<Self>, Self::Rejection> {
        Ok(parts.extensions.get::<Session>().cloned())
    }
}
