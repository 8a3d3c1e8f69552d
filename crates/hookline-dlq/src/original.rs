//! The original event of a dead letter, decoded for people: a record published as Avro
//! through the registry is opaque bytes in the envelope; this reads it back as the event's
//! JSON form, so the on-call engineer sees the webhook body that failed.

use hookline_core::WebhookEvent;
use hookline_core::event::confluent_schema_id;
use hookline_kafka::Registry;
use serde_json::Value;

/// The event held by `payload` (an envelope's `original_payload_bytes`) in its JSON form,
/// when it is a Confluent-framed Avro event the registry can decode. `None` for a JSON
/// payload (already readable as it is) and for anything that does not decode: this is a
/// convenience for display, never a reason to fail.
pub async fn original_event(registry: &Registry, payload: &[u8]) -> Option<Value> {
    confluent_schema_id(payload)?;
    let value = registry.decode(payload).await.ok()?;
    let event = WebhookEvent::from_avro_value(value).ok()?;
    serde_json::from_slice(&event.to_json()).ok()
}
