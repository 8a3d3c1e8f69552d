//! The dispatcher's end-to-end tests, one binary, against the real local stack (broker and
//! registry from `deploy/local/stack up`; a redis-server for the ledger).

mod alerts;
mod attempts;
mod deadlines;
mod egress;
mod fanout;
mod faults;
mod harness;
mod isolation;
mod lanes;
mod leaks;
mod ledger;
mod ledger_postgres;
mod lifecycle;
mod operator;
mod pipeline;
mod poison;
mod registry_auth;
mod schema;
mod secure_kafka;
mod telemetry;
