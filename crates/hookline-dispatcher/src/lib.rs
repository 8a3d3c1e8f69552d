//! hookline's dispatcher: a consumer-group member that delivers webhook events over HTTP,
//! retries through tiered retry topics and parks what cannot be delivered in the DLQ.
//!
//! Follow one record: `poll` takes it in (`delivery::intake`), `delivery` runs its stages
//! (decode, validate, admit, attempt, decide, write), `shared` finishes its offset.

/// The hash map of the lookups on the delivery path (partitions, strict-order chains,
/// endpoints by id), several per delivery: foldhash's hasher, seeded per process, instead
/// of std's SipHash.
type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The hash set beside [`FastMap`], with the same hasher.
type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

mod admin;
mod attempts;
mod cancellations;
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
mod http;
mod ledger;
mod metrics;
mod offsets;
mod operator;
mod poll;
mod pressure;
mod record;
mod settings;
mod shared;
mod telemetry;

pub use admin::Readiness;
pub use cancellations::{CancellationsConfig, CancellationsSettings};
pub use config::{
    AdminConfig, BreakerConfig, ConcurrencyConfig, DispatcherConfig, GroupProtocol, HttpConfig,
    LedgerConfig, OutboundConfig, TopicsConfig,
};
pub use dispatcher::{Running, start, start_fanout};
pub use error::{DispatchError, Result};
pub use fanout::{FanoutConfig, FanoutSettings};
pub use http::{TlsError, endpoint_tls};
pub use ledger::{LedgerError, LedgerSettings, PgSettings, RedisSettings, Terminal};
pub use metrics::{Metrics, Totals};
pub use operator::{NoticeType, OperatorWebhooksConfig, OperatorWebhooksSettings};
pub use settings::Settings;
pub use telemetry::{TelemetryConfig, TelemetrySettings};
