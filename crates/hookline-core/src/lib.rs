//! hookline's core: record types, retry policy, classification, state machine, DLQ envelope.
//!
//! Pure logic without I/O; the producer, dispatcher and DLQ tooling build on it.

mod avro_util;
#[cfg(test)]
mod fuzz;
mod http_field;

pub mod attempt_log;
pub mod breaker;
pub mod cancellation;
pub mod classify;
pub mod concurrency;
pub mod decision;
pub mod endpoint;
pub mod envelope;
pub mod event;
pub mod fair_share;
pub mod framing;
pub mod headers;
pub mod pause;
pub mod policy;
pub mod schema;
pub mod secret;
pub mod signing;
pub mod state;
pub mod subscription;
pub mod trace;
pub mod url_guard;

pub use classify::{AttemptOutcome, Classification, ClassifyConfig, FailureKind, classify};
pub use endpoint::{Endpoint, EndpointConfig};
pub use envelope::{DlqEnvelope, ErrorReason};
pub use event::{EventError, WebhookEvent};
pub use headers::DeliveryMeta;
pub use policy::{RetryDecision, RetryPolicy, RetryTiers, Strategy};
pub use signing::SigningSecret;
pub use state::{DeliveryState, Transition};
