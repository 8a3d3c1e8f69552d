//! The attempt log: every attempt, retry, deferral, park and fan-out as one registry-framed
//! Avro record on `<events>.attempts`, keyed by event id, written by a task of its own
//! behind a bounded buffer, so that delivery never waits for it (a full buffer drops the
//! record and counts it).

mod config;
pub(crate) mod hooks;
mod metrics;
mod writer;

pub use config::{AttemptsConfig, AttemptsSettings};
pub(crate) use metrics::AttemptLogMetrics;
pub(crate) use writer::{AttemptLog, register_attempt_schema, start};
