//! The console's pages: server-rendered HTML (maud escapes everything), one module each.

pub mod actions;
pub mod archive;
pub mod dlq;
pub mod endpoints;
pub mod event;
pub mod layout;
pub mod links;
pub mod listing;
pub mod login;
pub mod overview;
pub mod record;
pub mod selector;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use hookline_dlq::DlqError;
use serde::Deserialize;

use crate::auth::{Permission, Role, Session};
use crate::config::ConsoleSettings;

pub use crate::auth::ECHO_HIDDEN;

/// Whether `session` is kept from payloads, and from what may echo them: a viewer, with
/// `console.hide_payloads_from_viewer`.
pub fn payloads_hidden(settings: &ConsoleSettings, session: &Session) -> bool {
    session.role == Role::Viewer && settings.hide_payloads_from_viewer
}

/// A form's or a query string's fields, in order (a field may repeat).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Params(pub Vec<(String, String)>);

impl Params {
    /// The first value of `name`, trimmed; empty when absent.
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.trim())
    }

    /// The first value of `name`, as given (a note keeps its spacing); empty when absent.
    pub fn raw(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// Why a page cannot be shown: a status and a message for the user.
#[derive(Debug)]
pub struct PageError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The page's heading.
    pub title: &'static str,
    /// What went wrong, for people (never a secret).
    pub message: String,
    /// Who asked, for the navigation.
    pub session: Option<Session>,
}

impl PageError {
    /// A request that cannot be served as given (a filter, a form field).
    pub fn bad_request(session: &Session, message: impl Into<String>) -> PageError {
        PageError {
            status: StatusCode::BAD_REQUEST,
            title: "Cannot do that",
            message: message.into(),
            session: Some(session.clone()),
        }
    }

    /// Kafka or the registry failed.
    pub fn dlq(session: &Session, error: &DlqError) -> PageError {
        let status = match error {
            DlqError::Filter(_) | DlqError::InvalidRate { .. } => StatusCode::BAD_REQUEST,
            DlqError::TopicNotFound { .. } => StatusCode::NOT_FOUND,
            _ => StatusCode::BAD_GATEWAY,
        };
        PageError {
            status,
            title: "Kafka or the registry did not answer as expected",
            message: error_chain(error),
            session: Some(session.clone()),
        }
    }

    /// Nothing there.
    pub fn not_found(session: &Session, message: impl Into<String>) -> PageError {
        PageError {
            status: StatusCode::NOT_FOUND,
            title: "Not found",
            message: message.into(),
            session: Some(session.clone()),
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        layout::error_page(
            self.session.as_ref(),
            self.status,
            self.title,
            &self.message,
        )
    }
}

/// A 403 unless `session`'s role has `permission`.
pub fn require(session: &Session, permission: Permission) -> Result<(), PageError> {
    if session.role.allows(permission) {
        return Ok(());
    }
    Err(PageError {
        status: StatusCode::FORBIDDEN,
        title: "Not allowed",
        message: format!("your role ({}) may not do this", session.role.as_str()),
        session: Some(session.clone()),
    })
}

/// An error and its causes on one line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// `GET /`: the DLQ.
pub async fn home(_session: Session) -> Response {
    Redirect::to("/dlq").into_response()
}

/// Any other path.
pub async fn not_found(session: Option<Session>) -> Response {
    layout::error_page(
        session.as_ref(),
        StatusCode::NOT_FOUND,
        "Not found",
        "There is no such page.",
    )
}

/// `name=value&...` for links, values encoded.
pub fn query(pairs: &[(&str, &str)]) -> String {
    let mut serializer = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        if !value.is_empty() {
            serializer.append_pair(name, value);
        }
    }
    serializer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_give_the_first_value_and_queries_skip_empty_ones() {
        let params = Params(vec![
            ("a".into(), " x ".into()),
            ("a".into(), "y".into()),
            ("b".into(), String::new()),
        ]);
        assert_eq!(params.get("a"), "x");
        assert_eq!(params.raw("a"), " x ");
        assert_eq!(params.get("missing"), "");
        assert_eq!(query(&[("id", "a b&c"), ("empty", "")]), "id=a+b%26c");
    }
}
