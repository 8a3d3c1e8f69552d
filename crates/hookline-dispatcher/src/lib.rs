//! hookline's dispatcher: a consumer-group member that delivers webhook events over HTTP,
//! retries through tiered retry topics and parks what cannot be delivered in the DLQ.

mod admin;
mod breaker;
mod config;
mod context;
mod deliver;
mod dispatcher;
mod endpoints;
mod envelope;
mod error;
mod ledger;
mod lifecycle;
mod metrics;
mod offsets;
mod poll;
mod process;
mod record;
mod route;
mod shared;

pub use admin::Readiness;
pub use config::{
    AdminConfig, BreakerConfig, ConcurrencyConfig, DispatcherConfig, HttpConfig, LedgerConfig,
    OutboundConfig, Settings, TopicsConfig,
};
pub use dispatcher::{Running, start};
pub use error::{DispatchError, Result};
pub use ledger::{LedgerError, LedgerSettings};
pub use metrics::{Metrics, Totals};
