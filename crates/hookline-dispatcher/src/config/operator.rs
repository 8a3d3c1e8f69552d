//! The `[operator_webhooks]` section: hookline's own webhooks as the user configures them,
//! and the notice types, which the user names in `events`.

use serde::{Deserialize, Serialize};

/// hookline's own webhooks about itself (Svix calls them operational webhooks), sent to one
/// endpoint of the endpoints topic through hookline's own pipeline. Off unless
/// `endpoint_id` is set.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct OperatorWebhooksConfig {
    /// The endpoint (an id of the endpoints topic) the notices go to: its URL, signing
    /// secrets and keys, headers, TLS and retry policy are its own. Unset: off.
    pub endpoint_id: Option<String>,
    /// Which notice types are sent (`delivery.parked`, `endpoint.circuit_opened`,
    /// `endpoint.circuit_closed`, `endpoint.disabled`, `endpoint.enabled`). Default all.
    pub events: Vec<String>,
    /// At most one notice of a type about one endpoint per this many milliseconds (a fixed
    /// window, the same on every replica); the others are counted as `deduplicated`.
    /// Default 60000.
    pub min_interval_ms: u64,
    /// At most this many notices per minute over all types and endpoints (a token bucket
    /// that holds a minute's worth); the others are counted as `rate_limited`. Default 30.
    pub max_per_minute: u32,
}

impl Default for OperatorWebhooksConfig {
    fn default() -> Self {
        OperatorWebhooksConfig {
            endpoint_id: None,
            events: NoticeType::ALL
                .iter()
                .map(|t| t.as_str().to_owned())
                .collect(),
            min_interval_ms: 60_000,
            max_per_minute: 30,
        }
    }
}

/// What a notice is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NoticeType {
    /// A delivery went to the DLQ.
    DeliveryParked,
    /// An endpoint's circuit breaker opened.
    CircuitOpened,
    /// An endpoint's circuit breaker closed again.
    CircuitClosed,
    /// The dispatcher disabled an endpoint.
    EndpointDisabled,
    /// A disabled endpoint was enabled again.
    EndpointEnabled,
}

impl NoticeType {
    /// Every type.
    pub const ALL: [NoticeType; 5] = [
        NoticeType::DeliveryParked,
        NoticeType::CircuitOpened,
        NoticeType::CircuitClosed,
        NoticeType::EndpointDisabled,
        NoticeType::EndpointEnabled,
    ];

    /// The event type (and metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeType::DeliveryParked => "delivery.parked",
            NoticeType::CircuitOpened => "endpoint.circuit_opened",
            NoticeType::CircuitClosed => "endpoint.circuit_closed",
            NoticeType::EndpointDisabled => "endpoint.disabled",
            NoticeType::EndpointEnabled => "endpoint.enabled",
        }
    }

    /// The type named `name`, if any.
    pub fn parse(name: &str) -> Option<NoticeType> {
        NoticeType::ALL.into_iter().find(|t| t.as_str() == name)
    }
}
