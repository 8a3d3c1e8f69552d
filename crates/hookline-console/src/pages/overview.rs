//! `GET /overview`: deliveries per minute by status and DLQ inflow over the last hour, the
//! dispatchers' consumer lag and open circuits, as [`crate::insight`] reads them from Kafka
//! (and the dispatchers' `/metrics`, when configured). Every role may see it.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::layout::{Nav, page, respond};
use super::{PageError, error_chain};
use crate::auth::Session;
use crate::insight::InsightError;
use crate::insight::view::{circuits_list, lag_table, overview_page};
use crate::state::AppState;

/// `GET /overview`.
pub async fn show(State(state): State<AppState>, session: Session) -> Result<Response, PageError> {
    let insight = state.insight();
    let (overview, lag, circuits) =
        tokio::join!(insight.overview(), insight.lag(), insight.circuits());
    let overview = overview.map_err(|e| unavailable(&session, &e))?;
    let lag = lag.map_err(|e| unavailable(&session, &e))?;
    let body = maud::html! {
        (overview_page(&overview))
        (lag_table(&lag))
        (circuits_list(&circuits))
    };
    Ok(respond(
        StatusCode::OK,
        page(Some(&session), "Overview", Nav::Overview, body),
    ))
}

/// Kafka (or the registry) could not be read for a page of [`crate::insight`].
pub(crate) fn unavailable(session: &Session, error: &InsightError) -> PageError {
    PageError {
        status: StatusCode::BAD_GATEWAY,
        title: "Kafka could not be read",
        message: error_chain(error),
        session: Some(session.clone()),
    }
}
