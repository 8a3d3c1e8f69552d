//! Helpers for end-to-end tests against the real local stack (see `deploy/local/stack`).

mod stack;
mod wait;

pub use stack::{kafka_settings, registry_settings, unique_name};
pub use wait::wait_until;
