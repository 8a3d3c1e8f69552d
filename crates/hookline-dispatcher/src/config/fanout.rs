//! The `[fanout]` section: the fan-out stage as the user configures it.

use serde::{Deserialize, Serialize};

/// The fan-out stage: it reads tenant events from the fan-out topic and writes one delivery
/// per subscribed endpoint to the events topic, in one Kafka transaction with its offsets.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FanoutConfig {
    /// Run the fan-out stage inside `hookline dispatch` (`hookline fanout` runs it alone).
    /// Default true.
    pub enabled: bool,
    /// The topic tenant events are published to, keyed by tenant id; default
    /// `<topics.events>.fanout`.
    pub topic: Option<String>,
    /// The fan-out stage's consumer group; default `<group_id>.fanout`.
    pub group_id: Option<String>,
    /// The Kafka transactional id of this instance; default `<fan-out group>-<instance>`,
    /// where the instance is `group_instance_id` when set (a restart then fences its
    /// predecessor's open transaction at once), else the dispatcher id.
    pub transactional_id: Option<String>,
    /// How long a transaction may stay open before the broker aborts it, in milliseconds:
    /// how long the deliveries behind a crashed instance's open transaction can wait.
    /// Default 10000.
    pub transaction_timeout_ms: u64,
    /// Most tenant events fanned out in one transaction. Default 100.
    pub max_batch_events: usize,
    /// Most deliveries written in one transaction (a batch ends at the event that reaches
    /// it). Default 20000.
    pub max_batch_deliveries: usize,
    /// How long a batch waits for more events once it has one, in milliseconds. Default 10.
    pub linger_ms: u64,
}

impl Default for FanoutConfig {
    fn default() -> Self {
        FanoutConfig {
            enabled: true,
            topic: None,
            group_id: None,
            transactional_id: None,
            transaction_timeout_ms: 10_000,
            max_batch_events: 100,
            max_batch_deliveries: 20_000,
            linger_ms: 10,
        }
    }
}
