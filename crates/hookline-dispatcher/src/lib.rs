//! hookline's dispatcher: a consumer-group member that delivers webhook events over HTTP,
//! retries through tiered retry topics and parks what cannot be delivered in the DLQ.
//!
//! Follow one record: `poll` takes it in (`delivery::intake`), `delivery` runs its stages
//! (decode, validate, admit, attempt, decide, write), `shared` finishes its offset.

mod admin;
mod admission;
mod attempts;
mod cancellations;
mod clock;
mod compacted;
mod config;
mod context;
mod delivery;
mod dispatcher;
mod endpoints;
mod envelope;
mod error;
mod events;
mod fanout;
mod fast;
mod http;
mod ledger;
mod metrics;
mod offsets;
mod operator;
mod poll;
mod readiness;
mod record;
mod settings;
mod shared;
mod signals;
mod telemetry;

pub use config::{
    AdminConfig, BreakerConfig, CancellationsConfig, ConcurrencyConfig, DispatcherConfig,
    FanoutConfig, GroupProtocol, HttpConfig, LedgerConfig, NoticeType, OperatorWebhooksConfig,
    OutboundConfig, TelemetryConfig, TopicsConfig,
};
pub use dispatcher::{Running, start, start_fanout};
pub use error::{DispatchError, LedgerError, Result};
pub use http::{TlsError, endpoint_tls};
pub use ledger::Terminal;
pub use metrics::{Metrics, Totals};
pub use readiness::Readiness;
pub use settings::{
    CancellationsSettings, FanoutSettings, LedgerSettings, OperatorWebhooksSettings, PgSettings,
    RedisSettings, Settings, TelemetrySettings,
};
