//! The admin port: `/healthz` (the process runs), `/readyz` (endpoints loaded and the consumer
//! assigned), `/metrics` (Prometheus).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// What `/readyz` reports.
#[derive(Debug, Default)]
pub struct Readiness {
    endpoints_loaded: AtomicBool,
    consuming: AtomicBool,
}

impl Readiness {
    pub(crate) fn set_endpoints_loaded(&self) {
        self.endpoints_loaded.store(true, Ordering::Release);
    }

    pub(crate) fn set_consuming(&self, consuming: bool) {
        self.consuming.store(consuming, Ordering::Release);
    }

    /// Whether the dispatcher is delivering.
    pub fn is_ready(&self) -> bool {
        self.endpoints_loaded.load(Ordering::Acquire) && self.consuming.load(Ordering::Acquire)
    }
}

#[derive(Clone)]
struct AdminState {
    metrics: Metrics,
    readiness: Arc<Readiness>,
}

/// Binds the admin port and serves it until `shutdown`; returns the bound address.
pub(crate) async fn serve(
    listen: SocketAddr,
    metrics: Metrics,
    readiness: Arc<Readiness>,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(listen).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AdminState { metrics, readiness });
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(error) = served {
            tracing::warn!(%error, "admin server stopped");
        }
    });
    Ok(bound)
}

async fn readyz(State(state): State<AdminState>) -> (StatusCode, &'static str) {
    if state.readiness.is_ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
    }
}

async fn metrics_text(State(state): State<AdminState>) -> String {
    state.metrics.encode()
}
