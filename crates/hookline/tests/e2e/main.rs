//! End-to-end tests of the `hookline` binary, one test binary, against the real local stack.

mod cli;
mod dispatch;
mod dlq_cli;
mod egress;
mod fanout;
