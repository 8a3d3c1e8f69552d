//! Outbound HTTP: the request built from an event (pure), the address guard, the client.

mod client;
mod guard;
mod request;

#[cfg(test)]
mod leaks;

pub use client::{Attempt, HttpSender};
pub use guard::precheck;
pub use request::{RequestParts, build_request};
