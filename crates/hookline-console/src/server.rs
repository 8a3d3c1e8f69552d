//! The HTTP server: routes, the state every handler shares, and the layers every request
//! goes through (who is asking, revoked sessions refused, CSRF on every POST, security
//! headers).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{FromRef, FromRequestParts, OptionalFromRequestParts, Request, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum_extra::extract::cookie::{Cookie, Key, SameSite, SignedCookieJar};
use hookline_dlq::archive::store::{ArchiveStore, StoreSettings};
use hookline_dlq::filter::now_ms;
use hookline_kafka::{KafkaSettings, Registry};
use hookline_producer::{EndpointStore, Topics};
use tokio_util::sync::CancellationToken;

use crate::auth::session::{CookieValue, Resolved, resolve};
use crate::auth::{CookieNames, LoginGate, Revoked, Session, csrf};
use crate::config::ConsoleSettings;
use crate::error::{ConsoleError, Result};
use crate::pages;

/// The most bytes of a form body read (a note, a selection).
const MAX_FORM_BYTES: usize = 64 * 1024;

/// The page's policy: everything from the console itself, no inline script or style, no
/// framing, forms posting only back to it.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What the console reads and writes: Kafka, the registry, the topic names, the object
/// store archives go to.
#[derive(Clone)]
pub struct ConsoleContext {
    /// How to reach Kafka.
    pub kafka: KafkaSettings,
    /// The schema registry client.
    pub registry: Arc<Registry>,
    /// The topic names (the DLQ, its actions, the attempt log, the endpoint table).
    pub topics: Topics,
    /// How to reach the store of `console.archive_to` (the `[archive]` section, as for
    /// `hookline dlq archive`); the default when archiving is off.
    pub archive: StoreSettings,
}

/// The state every handler shares.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub(crate) struct Inner {
    pub settings: ConsoleSettings,
    pub key: Key,
    pub context: ConsoleContext,
    pub endpoints: EndpointStore,
    pub insight: crate::insight::Insight,
    pub archive: Option<ArchiveStore>,
    pub login_gate: LoginGate,
    pub revoked: Revoked,
    pub cookie_names: CookieNames,
}

impl AppState {
    /// The state of a console with `settings` over `context`.
    pub fn new(settings: ConsoleSettings, context: ConsoleContext) -> Result<AppState> {
        // The key's length (at least 32 bytes) is checked by the settings' validation.
        let key = Key::derive_from(settings.session_key.expose().as_bytes());
        let endpoints = EndpointStore::new(&context.kafka, &context.topics.endpoints)?;
        let insight_settings = settings
            .insight
            .to_settings(&context.topics.events)
            .map_err(Box::new)?;
        let insight = crate::insight::Insight::new(
            &context.kafka,
            Arc::clone(&context.registry),
            &context.topics.endpoints,
            insight_settings,
        )
        .map_err(Box::new)?;
        // Made once, at start-up, so that a bad destination stops the console there (a local
        // directory is made now); nothing is sent to a store until an archive runs.
        let archive = settings
            .archive_to
            .as_ref()
            .map(|url| ArchiveStore::open(url, &context.archive, true))
            .transpose()
            .map_err(ConsoleError::Archive)?;
        let login_gate = LoginGate::new(&settings.users, &settings.login);
        let cookie_names = CookieNames::new(settings.secure_cookies);
        Ok(AppState(Arc::new(Inner {
            settings,
            key,
            context,
            endpoints,
            insight,
            archive,
            login_gate,
            revoked: Revoked::default(),
            cookie_names,
        })))
    }

    /// Where the DLQ is archived to, when archiving is on.
    pub(crate) fn archive(&self) -> Option<&ArchiveStore> {
        self.0.archive.as_ref()
    }

    pub(crate) fn insight(&self) -> &crate::insight::Insight {
        &self.0.insight
    }

    pub(crate) fn endpoints(&self) -> &EndpointStore {
        &self.0.endpoints
    }

    pub(crate) fn settings(&self) -> &ConsoleSettings {
        &self.0.settings
    }

    pub(crate) fn context(&self) -> &ConsoleContext {
        &self.0.context
    }

    pub(crate) fn login_gate(&self) -> &LoginGate {
        &self.0.login_gate
    }

    pub(crate) fn revoked(&self) -> &Revoked {
        &self.0.revoked
    }

    /// The cookies' names (`__Host-` ones with `Secure` cookies).
    pub(crate) fn cookie_names(&self) -> CookieNames {
        self.0.cookie_names
    }

    /// A cookie as the console sets them: `HttpOnly`, `SameSite=Strict`, `Path=/`, no
    /// `Domain`, and `Secure` unless the console is on loopback over plain HTTP.
    pub(crate) fn cookie(&self, name: &'static str, value: String) -> Cookie<'static> {
        Cookie::build((name, value))
            .http_only(true)
            .same_site(SameSite::Strict)
            .path("/")
            .secure(self.0.settings.secure_cookies)
            .build()
    }

    /// The removal of the cookie `name`, with the attributes it was set with (a browser
    /// ignores a `__Host-` cookie without `Secure`, its removal included).
    pub(crate) fn removal(&self, name: &'static str) -> Cookie<'static> {
        let mut cookie = self.cookie(name, String::new());
        cookie.make_removal();
        cookie
    }
}

impl FromRef<AppState> for Key {
    fn from_ref(state: &AppState) -> Key {
        state.0.key.clone()
    }
}

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
