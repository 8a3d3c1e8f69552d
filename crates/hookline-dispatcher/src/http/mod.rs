//! Outbound HTTP: the request built from an event (pure), the address guard, the clients
//! (shared, or an endpoint's own with its TLS material).

mod client;
mod guard;
mod request;
mod tls;

#[cfg(test)]
mod leaks;
#[cfg(test)]
mod trust;

pub use client::{Attempt, ClientFactory, HttpSender};
pub use request::{RequestParts, build_request};
pub use tls::{TlsError, certificates, endpoint_tls};
