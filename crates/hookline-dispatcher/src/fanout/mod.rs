//! The fan-out stage: tenant events from the fan-out topic become one delivery per
//! subscribed endpoint in the events topic, written in one Kafka transaction with the
//! consumed offsets, so that a crash or a rebalance never loses nor doubles one.
//!
//! `plan` turns one event into its deliveries (pure); `stage` is the loop with its
//! transactions, `kafka` its Kafka calls. Its `[fanout]` section is `config::FanoutConfig`,
//! converted in `settings::fanout`; its telemetry is `metrics::FanoutMetrics`.

mod kafka;
mod plan;
mod stage;

pub(crate) use stage::{Stage, run};
