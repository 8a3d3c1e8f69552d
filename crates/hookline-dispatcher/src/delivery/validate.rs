//! Stage 2, validate: the event's own checks, its endpoint (looked up once), the URL it goes
//! to (chosen once) and the address guard.

use std::sync::Arc;

use hookline_core::WebhookEvent;
use hookline_core::envelope::ErrorReason;

use super::ctx::{Ctx, Delivery, Halt};
use crate::endpoints::Endpoint;
use crate::envelope::Failure;

/// Where a validated event goes.
pub(crate) struct Target {
    pub endpoint: Arc<Endpoint>,
    /// The URL of every attempt: the event's own, else the endpoint's.
    pub url: String,
    /// `url` parsed (by the pre-check), as requests take it.
    pub address: reqwest::Url,
    /// Whether `url` is the event's `endpoint_url` rather than the endpoint's own: then the
    /// request is signed but carries none of the endpoint's credentials (custom headers),
    /// as whoever publishes chose where it goes.
    pub url_overridden: bool,
}

impl Target {
    /// Where the delivery's age counts from. A strict endpoint retries in place, in memory,
    /// so a restart forgets its first attempt: its age counts from the event's creation too,
    /// which a dispatcher cannot forget, so a dead strict endpoint is parked after the
    /// maximum age whatever the restarts.
    pub fn age_origin(&self, first_attempt_at_ms: i64, event: &WebhookEvent) -> i64 {
        let created = event.created_at_ms;
        if self.endpoint.config.strict_ordering && created > 0 {
            first_attempt_at_ms.min(created)
        } else {
            first_attempt_at_ms
        }
    }
}

/// Validates `event` and finds where it goes, or rejects it.
pub(crate) async fn target(
    ctx: &Ctx,
    delivery: &Delivery,
    event: &WebhookEvent,
) -> Result<Target, Halt> {
    if let Err(error) = event.validate(ctx.settings.max_payload_bytes) {
        return Err(Halt::Reject(Failure::new(
            error.reason(),
            error.to_string(),
        )));
    }
    // A tenant event is delivered only through the fan-out stage, which reads it from the
    // fan-out topic and writes one delivery per subscribed endpoint here.
    let Some(endpoint_id) = event.endpoint_id.as_deref() else {
        let message = format!(
            "a tenant event (no endpoint_id) is fanned out only from the fan-out topic {}; publish it there",
            ctx.settings.fanout.topic
        );
        return Err(Halt::Reject(Failure::new(
            ErrorReason::MalformedEvent,
            message,
        )));
    };
    // Intake looked the record's key up; an event that names another endpoint than its key
    // is looked up by the name it carries.
    let endpoint = match &delivery.endpoint {
        Some(endpoint) if endpoint.id == endpoint_id => Some(Arc::clone(endpoint)),
        Some(_) | None => ctx.endpoints.get(endpoint_id),
    };
    let Some(endpoint) = endpoint else {
        return Err(Halt::Reject(Failure::new(
            ErrorReason::UnknownEndpoint,
            format!("no endpoint {endpoint_id:?} is configured"),
        )));
    };
    let (url, url_overridden) = chosen_url(event, &endpoint);
    if !endpoint.config.enabled {
        let message = format!("endpoint {} is disabled", endpoint.id);
        let failure = Failure::new(ErrorReason::EndpointDisabled, message).at(url);
        return Err(Halt::Reject(failure));
    }
    if url_overridden && !endpoint.config.allow_url_override {
        let message = format!(
            "the event's endpoint_url replaces the URL of endpoint {}, which does not allow it \
             (allow_url_override is false); nothing was sent",
            endpoint.id
        );
        let failure = Failure::new(ErrorReason::BlockedUrl, message).at(url);
        return Err(Halt::Reject(failure));
    }
    let address = match ctx.http.precheck(url).await {
        Ok(address) => address,
        Err(error) => {
            let failure = Failure::new(ErrorReason::BlockedUrl, error.to_string()).at(url);
            return Err(Halt::Reject(failure));
        }
    };
    let url = url.to_owned();
    Ok(Target {
        endpoint,
        url,
        address,
        url_overridden,
    })
}

/// The URL of the delivery, and whether it is the event's override. An `endpoint_url` equal
/// to the endpoint's own URL overrides nothing.
fn chosen_url<'a>(event: &'a WebhookEvent, endpoint: &'a Endpoint) -> (&'a str, bool) {
    match event.endpoint_url.as_deref() {
        Some(url) if url != endpoint.config.url => (url, true),
        Some(_) | None => (&endpoint.config.url, false),
    }
}
