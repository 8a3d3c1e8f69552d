//! Topic names: the events topic, and the retry, DLQ and action topics named after it.

use std::time::Duration;

use hookline_core::policy::format_suffix;

/// Default name of the events topic.
pub const DEFAULT_EVENTS_TOPIC: &str = "webhook-events";

/// Default name of the compacted endpoint table.
pub const DEFAULT_ENDPOINTS_TOPIC: &str = "webhook-endpoints";

/// The names of hookline's topics; everything but the endpoint table derives from the
/// events topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topics {
    /// The events topic, e.g. `webhook-events`.
    pub events: String,
    /// The compacted endpoint table, e.g. `webhook-endpoints`.
    pub endpoints: String,
}

impl Default for Topics {
    fn default() -> Self {
        Topics::new(DEFAULT_EVENTS_TOPIC, DEFAULT_ENDPOINTS_TOPIC)
    }
}

impl Topics {
    /// Names derived from `events`, with the endpoint table `endpoints`.
    pub fn new(events: impl Into<String>, endpoints: impl Into<String>) -> Self {
        Topics {
            events: events.into(),
            endpoints: endpoints.into(),
        }
    }

    /// The retry topic of the tier with this delay: `<events>.retry.<suffix>`, e.g.
    /// `webhook-events.retry.5s` (the suffix of `hookline_core::policy::format_suffix`).
    pub fn retry(&self, tier_delay: Duration) -> String {
        format!("{}.retry.{}", self.events, format_suffix(tier_delay))
    }

    /// The slow lane: `<events>.lane`, where a slow endpoint's records wait for its turn,
    /// keyed by endpoint (the dispatcher creates it when missing).
    pub fn lane(&self) -> String {
        format!("{}.lane", self.events)
    }

    /// The fan-out topic: `<events>.fanout`, where tenant events are published (keyed by
    /// tenant id) for the fan-out stage to turn into deliveries.
    pub fn fanout(&self) -> String {
        format!("{}.fanout", self.events)
    }

    /// The attempt-log topic: `<events>.attempts`, one record per attempt, retry, deferral,
    /// park and fan-out, keyed by event id.
    pub fn attempts(&self) -> String {
        format!("{}.attempts", self.events)
    }

    /// The compacted cancellations topic: `<events>.cancellations`, keyed by event id (or
    /// `EVENT_ID/ENDPOINT_ID`), read by every dispatcher before each attempt.
    pub fn cancellations(&self) -> String {
        format!("{}.cancellations", self.events)
    }

    /// The dead-letter topic: `<events>.dlq`.
    pub fn dlq(&self) -> String {
        format!("{}.dlq", self.events)
    }

    /// The compacted topic of DLQ actions (re-drives, discards): `<events>.dlq-actions`.
    pub fn dlq_actions(&self) -> String {
        format!("{}.dlq-actions", self.events)
    }
}

#[cfg(test)]
mod tests {
    use hookline_core::policy::RetryTiers;

    use super::*;

    #[test]
    fn derived_names() {
        let topics = Topics::default();
        assert_eq!(topics.events, "webhook-events");
        assert_eq!(topics.endpoints, "webhook-endpoints");
        assert_eq!(
            topics.retry(Duration::from_millis(200)),
            "webhook-events.retry.200ms"
        );
        assert_eq!(topics.dlq(), "webhook-events.dlq");
        assert_eq!(topics.lane(), "webhook-events.lane");
        assert_eq!(topics.fanout(), "webhook-events.fanout");
        assert_eq!(topics.dlq_actions(), "webhook-events.dlq-actions");
        assert_eq!(topics.cancellations(), "webhook-events.cancellations");
    }

    #[test]
    fn retry_names_match_the_core_tiers() {
        let topics = Topics::new("ev", "ep");
        let tiers = RetryTiers::default();
        let ours: Vec<String> = tiers
            .tiers()
            .iter()
            .map(|t| topics.retry(t.delay))
            .collect();
        assert_eq!(ours, tiers.topics("ev"));
        assert_eq!(
            ours,
            ["ev.retry.5s", "ev.retry.1m", "ev.retry.10m", "ev.retry.1h"]
        );
    }
}
