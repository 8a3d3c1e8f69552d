//! Stage 1, decode: the record's event (its retry state was read at intake, `intake`):
//! JSON, or Confluent-framed Avro through the registry, whose outages are waited out rather
//! than taken for bad records.

use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_core::envelope::ErrorReason;
use hookline_core::event::confluent_schema_id;
use hookline_core::pause::Pauses;

use super::ctx::{Ctx, Delivery, Halt};
use crate::envelope::Failure;

/// Decodes the record's value: Confluent-framed Avro when it starts with the magic byte,
/// JSON otherwise. A registry that cannot answer now is waited for (until the record has to
/// move on to a tier); a value that cannot be decoded is a malformed event.
pub(crate) async fn event(ctx: &Ctx, delivery: &Delivery) -> Result<WebhookEvent, Halt> {
    let malformed =
        |message: String| Halt::Reject(Failure::new(ErrorReason::MalformedEvent, message));
    let Some(value) = delivery.record.value.as_deref() else {
        return Err(malformed("the record has no value".to_owned()));
    };
    if confluent_schema_id(value).is_none() {
        return WebhookEvent::from_json(value)
            .map_err(|error| malformed(format!("not a webhook event: {error}")));
    }
    let mut pauses = Pauses::new(Duration::from_millis(200), Duration::from_secs(10));
    let decoded = loop {
        // Boxed: the registry client's future would make every delivery task larger.
        match Box::pin(ctx.registry.decode(value)).await {
            Ok(decoded) => break decoded,
            Err(error) if error.is_transient() => {
                ctx.metrics.registry_wait();
                tracing::warn!(%error, "the registry cannot answer; waiting to decode");
                tokio::select! {
                    () = delivery.moved_on() => {
                        return Err(Halt::Defer {
                            why: "registry_unavailable",
                            wait: ctx.settings.first_tier_delay(),
                        });
                    }
                    () = tokio::time::sleep(pauses.next_pause()) => {}
                }
            }
            Err(error) => return Err(malformed(format!("cannot decode the Avro value: {error}"))),
        }
    };
    WebhookEvent::from_avro_value(decoded)
        .map_err(|error| malformed(format!("not a webhook event: {error}")))
}
