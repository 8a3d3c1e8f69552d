//! The fan-out stage: tenant events from the fan-out topic become one delivery per
//! subscribed endpoint in the events topic, written in one Kafka transaction with the
//! consumed offsets, so that a crash or a rebalance never loses nor doubles one.
//!
//! `config` is the `[fanout]` section; `plan` turns one event into its deliveries (pure);
//! `stage` is the loop with its transactions, `kafka` its Kafka calls; `metrics` its
//! telemetry.

mod config;
mod kafka;
mod metrics;
mod plan;
mod stage;

pub use config::{FanoutConfig, FanoutSettings};
pub(crate) use metrics::FanoutMetrics;
pub(crate) use stage::{Stage, run};
