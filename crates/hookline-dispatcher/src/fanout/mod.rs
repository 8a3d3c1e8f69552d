//! The fan-out stage: tenant events from the fan-out topic become one delivery per
//! subscribed endpoint in the events topic, written in one Kafka transaction with the
//! consumed offsets, so that a crash or a rebalance never loses nor doubles one.

mod config;

pub use config::{FanoutConfig, FanoutSettings};
