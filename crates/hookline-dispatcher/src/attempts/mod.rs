//! The attempt log: every attempt, retry, deferral, park and fan-out as one registry-framed
//! Avro record on `<events>.attempts`, keyed by event id, handed to a producer of its own
//! whose queue is bounded, so that delivery never waits for it (a full queue drops the
//! record and counts it).

pub(crate) mod hooks;
mod writer;

pub(crate) use writer::{AttemptLog, register_attempt_schema, start};
