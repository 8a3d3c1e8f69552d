//! The transactional outbox: `enqueue` writes an event into the `hookline_outbox` table in
//! the caller's transaction; the [`Relay`] claims waiting tasks (`FOR UPDATE SKIP LOCKED`,
//! with a lease), publishes them with hookline's [`Publisher`](crate::Publisher) and marks
//! them `COMPLETE` once Kafka acknowledged them.
//!
//! A task goes `NOT_CALLED -> WIP -> COMPLETE`; a publish the event itself makes fail puts
//! it back to `NOT_CALLED` with a backoff, and after `max_retries` to `FAILED`. While Kafka
//! is unreachable the relay backs off without counting retries.

mod backoff;
mod classify;
mod config;
mod enqueue;
mod error;
mod listen;
mod metrics;
mod relay;
mod status;
mod store;
mod task;

pub use backoff::task_backoff;
pub use classify::{Failure, classify};
pub use config::{DEFAULT_SCHEMA, OutboxConfig, RelaySettings, StoreSettings, schema_ok};
pub use enqueue::{enqueue, enqueue_in};
pub use error::OutboxError;
pub use metrics::OutboxMetrics;
pub use relay::Relay;
pub use status::{FailedTask, OutboxStatus};
pub use store::{NOTIFY_CHANNEL, OutboxStore};
pub use task::TaskStatus;
