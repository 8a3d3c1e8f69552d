//! The admin port: `/healthz` (the process runs), `/readyz` (endpoints loaded, the consumer
//! assigned, and fetching without repeated errors), `/metrics` (Prometheus).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::readiness::Readiness;

#[derive(Clone)]
struct AdminState {
    metrics: Metrics,
    readiness: Arc<Readiness>,
}

/// Binds the admin port; returns the bound address and the server, which runs until
/// `shutdown`.
pub(crate) async fn serve(
    listen: SocketAddr,
    metrics: Metrics,
    readiness: Arc<Readiness>,
    shutdown: CancellationToken,
) -> std::io::Result<(SocketAddr, impl Future<Output = ()> + Send + 'static)> {
    let listener = TcpListener::bind(listen).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AdminState { metrics, readiness });
    let server = async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(error) = served {
            tracing::warn!(%error, "admin server stopped");
        }
    };
    Ok((bound, server))
}

async fn readyz(State(state): State<AdminState>) -> (StatusCode, String) {
    match state.readiness.not_ready_because() {
        None => (StatusCode::OK, "ready\n".to_owned()),
        Some(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}

async fn metrics_text(State(state): State<AdminState>) -> String {
    state.metrics.encode()
}
