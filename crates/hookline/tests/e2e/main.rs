//! End-to-end tests of the `hookline` binary, one test binary, against the real local stack.

mod avro_bomb;
mod cli;
mod cli_signing;
mod dispatch;
mod dlq_archive_store;
mod dlq_cli;
mod egress;
mod endpoints_lifecycle;
mod events_cancel;
mod events_history;
mod events_tail;
mod fanout;
mod kafka_properties;
mod lane_crash;
mod leaks;
mod outbox;
mod secrets;
