//! Records in the forms older producers write, to show they are still delivered.

use apache_avro::types::Value;
use hookline_core::WebhookEvent;

/// The event as a value of the version 1 schema (`WEBHOOK_EVENT_V1`): no `tenant_id`, no
/// `channels`, no `expires_at`, and `endpoint_id` a plain string, as a producer built before version 2
/// writes it.
pub fn v1_avro_value(event: &WebhookEvent) -> Value {
    let Value::Record(fields) = event.to_avro_value() else {
        unreachable!("an event is always a record value");
    };
    Value::Record(
        fields
            .into_iter()
            .filter(|(name, _)| !["tenant_id", "channels", "expires_at"].contains(&name.as_str()))
            .map(|(name, value)| match (name.as_str(), value) {
                ("endpoint_id", Value::Union(_, inner)) => (name, *inner),
                (_, value) => (name, value),
            })
            .collect(),
    )
}
