//! The `tower` layer: reads the body (bounded), verifies the signature, claims the
//! `webhook-id` in the [`DedupStore`] under a processing lease, runs the inner service once
//! per id, and records its outcome with the claim's token (2xx: `succeeded`; anything else,
//! or a dropped request: the claim is released).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tower::{Layer, Service};

use crate::config::{OnStoreError, ReceiverSettings};
use crate::dedup::{Claim, ClaimToken, DedupStore, Settle};
use crate::verify::Rejection;

type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Verifies and de-duplicates every request to the services it wraps.
pub struct WebhookLayer<D> {
    settings: Arc<ReceiverSettings>,
    store: Arc<D>,
    clock: Clock,
}

impl<D> Clone for WebhookLayer<D> {
    fn clone(&self) -> Self {
        WebhookLayer {
            settings: self.settings.clone(),
            store: self.store.clone(),
            clock: self.clock.clone(),
        }
    }
}

impl<D: DedupStore> WebhookLayer<D> {
    /// A layer with these settings over this store, on the system clock.
    pub fn new(settings: ReceiverSettings, store: D) -> Self {
        WebhookLayer {
            settings: Arc::new(settings),
            store: Arc::new(store),
            clock: Arc::new(system_now_s),
        }
    }

    /// The same layer reading the time (epoch seconds) from `clock` (for tests).
    pub fn with_clock(mut self, clock: impl Fn() -> i64 + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }
}

fn system_now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl<S, D> Layer<S> for WebhookLayer<D> {
    type Service = WebhookService<S, D>;

    fn layer(&self, inner: S) -> Self::Service {
        WebhookService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`WebhookLayer`] makes.
pub struct WebhookService<S, D> {
    inner: S,
    layer: WebhookLayer<D>,
}

impl<S: Clone, D> Clone for WebhookService<S, D> {
    fn clone(&self) -> Self {
        WebhookService {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S, D> Service<Request<Body>> for WebhookService<S, D>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    D: DedupStore,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // The ready service goes into the future; a fresh clone stays for the next call.
        let fresh = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, fresh);
        let layer = self.layer.clone();
        Box::pin(async move { Ok(handle(layer, inner, request).await) })
    }
}

async fn handle<S, D>(layer: WebhookLayer<D>, mut inner: S, request: Request<Body>) -> Response
where
    S: Service<Request<Body>, Response = Response, Error = Infallible>,
    D: DedupStore,
{
    let settings = &layer.settings;
    let (mut parts, body) = request.into_parts();
    let bytes = match Limited::new(body, settings.max_body_bytes).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => {
            return refuse(Rejection::BodyTooLarge);
        }
        Err(_) => return refuse(Rejection::Body),
    };
    let verified = match settings
        .verifier
        .verify(&parts.headers, &bytes, (layer.clock)())
    {
        Ok(verified) => verified,
        Err(rejection) => return refuse(rejection),
    };
    let id = verified.id.clone();
    parts.extensions.insert(verified);
    let request = Request::from_parts(parts, Body::from(bytes));
    let token = match layer
        .store
        .claim(&id, settings.processing_lease, settings.dedup_ttl)
        .await
    {
        Ok(Claim::Claimed(token)) => token,
        Ok(Claim::Succeeded) => {
            tracing::info!(webhook_id = %id, "duplicate of a processed webhook, not processed again");
            return (StatusCode::OK, "duplicate: already processed").into_response();
        }
        Ok(Claim::Processing) => {
            tracing::info!(webhook_id = %id, "duplicate of a webhook still processing");
            return (
                StatusCode::CONFLICT,
                "duplicate: still processing, retry later",
            )
                .into_response();
        }
        Err(error) => match settings.on_store_error {
            OnStoreError::Reject => {
                tracing::warn!(webhook_id = %id, op = error.op(), %error, "dedup store unavailable, refused with 503");
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "dedup store unavailable, retry later",
                )
                    .into_response();
            }
            OnStoreError::Process => {
                tracing::warn!(webhook_id = %id, op = error.op(), %error, "dedup store unavailable, processing without de-duplication");
                return call(&mut inner, request).await;
            }
        },
    };
    let mut claim = ClaimGuard {
        store: layer.store.clone(),
        claim: Some((id, token)),
    };
    let response = call(&mut inner, request).await;
    let Some((id, token)) = claim.claim.take() else {
        return response;
    };
    if response.status().is_success() {
        match layer.store.succeed(&id, &token, settings.dedup_ttl).await {
            Ok(Settle::Recorded) => {}
            Ok(Settle::Superseded) => {
                tracing::warn!(webhook_id = %id, "handler outlived its processing lease: another copy claimed the id since, success not recorded");
            }
            // The handler's work is done: the sender is told so; copies get 409 until the
            // processing lease runs out.
            Err(error) => {
                tracing::warn!(webhook_id = %id, op = error.op(), %error, "could not record the webhook as succeeded");
            }
        }
    } else {
        release(&*layer.store, &id, &token, "failed").await;
    }
    response
}

/// Gives a claim up; a claim taken over by a newer copy (its lease ran out) stays that copy's.
async fn release<D: DedupStore>(store: &D, id: &str, token: &ClaimToken, why: &'static str) {
    match store.release(id, token).await {
        Ok(Settle::Recorded) => {}
        Ok(Settle::Superseded) => {
            tracing::info!(webhook_id = %id, why, "claim not released: another copy holds the id since its lease ran out");
        }
        Err(error) => {
            tracing::warn!(webhook_id = %id, why, op = error.op(), %error, "could not release a webhook's claim; a retry is processed once the lease runs out");
        }
    }
}

async fn call<S>(inner: &mut S, request: Request<Body>) -> Response
where
    S: Service<Request<Body>, Response = Response, Error = Infallible>,
{
    match inner.call(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

fn refuse(rejection: Rejection) -> Response {
    tracing::info!(reason = rejection.code(), "webhook refused");
    (rejection.status(), rejection.to_string()).into_response()
}

/// Releases a claimed id when the request is dropped before its handler finished (the
/// sender hung up, the handler panicked), so the retry is processed, not answered 409.
struct ClaimGuard<D: DedupStore> {
    store: Arc<D>,
    claim: Option<(String, ClaimToken)>,
}

impl<D: DedupStore> Drop for ClaimGuard<D> {
    fn drop(&mut self) {
        let Some((id, token)) = self.claim.take() else {
            return;
        };
        let store = self.store.clone();
        // Without a runtime the lease runs out by itself.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { release(&*store, &id, &token, "abandoned").await });
        }
    }
}

#[cfg(test)]
#[path = "layer_tests.rs"]
mod tests;
