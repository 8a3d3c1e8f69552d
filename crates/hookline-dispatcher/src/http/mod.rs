//! Outbound HTTP: the request built from an event (pure), the address guard, the clients
//! (shared, or an endpoint's own with its TLS material).

mod client;
mod connect;
mod guard;
mod request;
mod tls;

#[cfg(test)]
mod leaks;
#[cfg(test)]
mod trust;
#[cfg(test)]
mod wire;

pub use client::{Attempt, HttpSender};
pub use connect::{ClientFactory, DeliveryClient};
pub use request::{RequestParts, build_request};
pub use tls::{Roots, TlsError, certificates, endpoint_tls};
