//! The DLQ tooling's end-to-end tests, one binary, against the real local stack.

mod actions;
mod common;
mod dlq;
mod redrive;
