//! Operational webhooks: hookline's own signed Standard Webhooks events about itself
//! (`delivery.parked`, `endpoint.circuit_opened`/`_closed`, `endpoint.disabled`/`_enabled`)
//! to an operator endpoint, published as normal deliveries on the events topic, de-duplicated
//! per (type, endpoint) and window with ids every replica computes alike, rate-limited
//! overall, and handed over without ever holding a delivery up.

mod config;
mod gate;
pub(crate) mod hooks;
mod metrics;
mod notice;
mod sender;

pub use config::{OperatorWebhooksConfig, OperatorWebhooksSettings};
pub(crate) use metrics::OperatorMetrics;
pub use notice::NoticeType;
pub(crate) use sender::{Operator, start};
