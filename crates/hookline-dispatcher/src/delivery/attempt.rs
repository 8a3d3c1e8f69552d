//! Stage 4, attempt: one signed HTTP POST of the event to its target, as a span of the
//! event's W3C trace (or the start of one), so receivers can join it.

use hookline_core::WebhookEvent;

use super::ctx::Ctx;
use super::validate::Target;
use crate::clock::now_ms;
use crate::endpoints::Endpoint;
use crate::http::{Attempt, RequestParts, build_request};
use crate::telemetry::DeliverySpan;

/// Sends attempt `attempt_no` of `event` to `target`.
pub(crate) async fn send(
    ctx: &Ctx,
    target: &Target,
    event: &WebhookEvent,
    trace: &DeliverySpan,
    attempt_no: u32,
) -> Attempt {
    let endpoint = &target.endpoint;
    let span = trace.attempt(&target.url, attempt_no);
    let traceparent = trace.traceparent(&span);
    let extras = endpoint_extras(target);
    let request = build_request(
        event,
        RequestParts {
            url: &target.address,
            url_overridden: target.url_overridden,
            // An override's receiver gets no signature by the endpoint's own keys, which it
            // could replay to the endpoint's URL.
            signer: if extras.is_some() {
                &endpoint.signer
            } else {
                &endpoint.override_signer
            },
            endpoint_headers: &endpoint.headers,
            timestamp_s: now_ms() / 1000,
            traceparent: Some(&traceparent),
            attempt: attempt_no,
            credential: extras.and_then(|endpoint| endpoint.config.auth.as_ref()),
        },
    );
    let client = extras.and_then(|endpoint| endpoint.client.as_ref());
    let mut attempt = ctx.http.send(client, request, endpoint.timeout).await;
    span.finish(&attempt);
    attempt.traceparent = Some(traceparent);
    attempt
}

/// The one place that decides whether an attempt carries the endpoint's signatures,
/// credential (`auth`) and client certificate: only when it goes to the endpoint's own
/// configured URL. An event's override URL (`endpoint_url`, allowed by
/// `allow_url_override`) gets none of them, and the shared client; it is signed with the
/// endpoint's `override_secrets` if it has any; `build_request` leaves out its custom
/// headers too.
fn endpoint_extras(target: &Target) -> Option<&Endpoint> {
    (!target.url_overridden && target.url == target.endpoint.config.url)
        .then_some(&*target.endpoint)
}
