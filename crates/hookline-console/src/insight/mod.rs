//! What the console's endpoint and overview pages show, gathered from Kafka: endpoint
//! health from the attempt log, deliveries by status, DLQ inflow, consumer lag and open
//! circuits. [`Insight`] does the reads; every page is a plain, serializable struct.
//!
//! ```no_run
//! # async fn page(kafka: hookline_kafka::KafkaSettings, registry: std::sync::Arc<hookline_kafka::Registry>) -> Result<(), hookline_console::insight::InsightError> {
//! use hookline_console::insight::{Insight, InsightConfig};
//! let settings = InsightConfig::default().to_settings("webhook-events")?;
//! let insight = Insight::new(&kafka, registry, "webhook-endpoints", settings)?;
//! let page = insight.endpoints(Some("acme")).await?;
//! let overview = insight.overview().await?;
//! insight.disable_endpoint("ep-1", Some("INC-42"), "alice").await?;
//! # Ok(()) }
//! ```

mod circuits;
mod config;
mod endpoints;
mod error;
mod gather;
mod lag;
mod overview;
mod read;
mod redact;
mod scrape;
mod stats;
pub mod view;
mod window;

pub use circuits::{CircuitSource, CircuitsReport};
pub use config::{InsightConfig, InsightSettings};
pub use endpoints::{EndpointRow, EndpointState, EndpointsPage, TenantEndpoints, group_rows};
pub use error::{InsightError, Result};
pub use gather::Insight;
pub use hookline_producer::endpoints::Switched;
pub use lag::{LagReport, TopicLag, partition_lag};
pub use overview::{Minute, MinuteCounts, Overview};
pub use read::ReadStats;
pub use redact::redact_endpoint_url;
pub use scrape::{
    CIRCUIT_OPEN_METRIC, CIRCUITS_OPEN_METRIC, CircuitGauges, CircuitState, Sample, ScrapeStatus,
    circuit_gauges, parse_exposition,
};
pub use stats::{DeliveryStatus, Health, LastError, StatusCounts, Tally, nearest_rank};
pub use window::{MINUTE_MS, Minutes, Window, now_ms};
