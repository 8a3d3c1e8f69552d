//! The attempt log: every attempt, retry, deferral, park and fan-out as one registry-framed
//! Avro record on `<events>.attempts`, keyed by event id, handed to a producer of its own
//! whose queue is bounded, so that delivery never waits for it (a full queue drops the
//! record and counts it).

mod config;
pub(crate) mod hooks;
mod metrics;
mod writer;

pub use config::{AttemptsConfig, AttemptsSettings};
pub(crate) use metrics::AttemptLogMetrics;
pub(crate) use writer::{AttemptLog, register_attempt_schema, start};
