//! Operational webhooks: hookline's own signed Standard Webhooks events about itself
//! (`delivery.parked`, `endpoint.circuit_opened`/`_closed`, `endpoint.disabled`/`_enabled`)
//! to an operator endpoint, published as normal deliveries on the events topic, de-duplicated
//! per (type, endpoint) and window with ids every replica computes alike, rate-limited
//! overall, and handed over without ever holding a delivery up.

mod gate;
pub(crate) mod hooks;
mod notice;
mod sender;

pub(crate) use notice::{Notice, Parked};
pub(crate) use sender::{Operator, start};
