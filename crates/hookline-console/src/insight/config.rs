//! The user-facing config of the endpoint and overview pages (`[console.insight]`), and
//! its validated settings.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use url::Url;

use super::error::InsightError;

/// What the endpoint and overview pages read, and how far back. Every field has a
/// default; embed it in the console's config as `[console.insight]`:
///
/// ```toml
/// [console.insight]
/// health_window_s = 900
/// overview_window_s = 3600
/// consumer_group = "hookline-dispatcher"
/// dispatcher_metrics_urls = ["http://10.0.0.5:9090/metrics", "http://10.0.0.6:9090/metrics"]
/// ```
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct InsightConfig {
    /// How far back an endpoint's success ratio, latency and last error look, in seconds.
    /// Default 900 (15 minutes); 60 to 86400.
    pub health_window_s: u64,
    /// How far back the overview's deliveries per minute and DLQ inflow go, in seconds.
    /// Default 3600 (the last hour); 60 to 86400.
    pub overview_window_s: u64,
    /// The dispatchers' admin `/metrics` URLs (`http://HOST:PORT/metrics`), scraped for
    /// open circuits (`webhook_circuit_open`). Default none: open circuits are then taken
    /// from the attempt log (an endpoint whose latest record is a `circuit_open` deferral).
    pub dispatcher_metrics_urls: Vec<String>,
    /// The dispatchers' consumer group (their `group_id`), whose lag is shown on the events
    /// topic and the retry tiers; its fan-out stage's group is `<consumer_group>.fanout`.
    /// Default `hookline-dispatcher`.
    pub consumer_group: String,
    /// The attempt-log topic; default `<events>.attempts` (the dispatchers'
    /// `attempts.topic`).
    pub attempts_topic: Option<String>,
    /// The DLQ topic; default `<events>.dlq` (the dispatchers' `topics.dlq`).
    pub dlq_topic: Option<String>,
    /// Most attempt-log records one page reads; past it the page says the figures are
    /// partial. Default 200000.
    pub max_attempt_records: u64,
    /// How long one scrape of a dispatcher's `/metrics` may take, in milliseconds.
    /// Default 2000.
    pub scrape_timeout_ms: u64,
    /// How long a Kafka read may yield nothing before its end is reached, in milliseconds.
    /// Default 15000.
    pub read_timeout_ms: u64,
}

impl Default for InsightConfig {
    fn default() -> Self {
        InsightConfig {
            health_window_s: 900,
            overview_window_s: 3600,
            dispatcher_metrics_urls: Vec::new(),
            consumer_group: "hookline-dispatcher".to_owned(),
            attempts_topic: None,
            dlq_topic: None,
            max_attempt_records: 200_000,
            scrape_timeout_ms: 2_000,
            read_timeout_ms: 15_000,
        }
    }
}

/// The shortest and longest window allowed, in seconds.
const WINDOW_RANGE_S: (u64, u64) = (60, 86_400);

/// [`InsightConfig`] validated: `Duration`s, parsed URLs, topic names resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InsightSettings {
    /// The endpoint health window.
    pub health_window: Duration,
    /// The overview window.
    pub overview_window: Duration,
    /// The dispatchers' `/metrics` URLs.
    pub dispatcher_metrics_urls: Vec<Url>,
    /// The dispatchers' consumer group.
    pub consumer_group: String,
    /// The attempt-log topic.
    pub attempts_topic: String,
    /// The DLQ topic.
    pub dlq_topic: String,
    /// The events topic (retry tiers are `<events>.retry.*`, fan-out `<events>.fanout`).
    pub events_topic: String,
    /// Most attempt-log records read per page.
    pub max_attempt_records: u64,
    /// The scrape timeout.
    pub scrape_timeout: Duration,
    /// The read idle timeout.
    pub read_timeout: Duration,
}

impl InsightConfig {
    /// Validates the config for the events topic `events_topic`; an error names the field
    /// (`console.insight.<field>`).
    pub fn to_settings(&self, events_topic: &str) -> Result<InsightSettings, InsightError> {
        let window = |field: &'static str, seconds: u64| {
            let (low, high) = WINDOW_RANGE_S;
            if (low..=high).contains(&seconds) {
                Ok(Duration::from_secs(seconds))
            } else {
                Err(InsightError::config(
                    field,
                    format!("must be {low} to {high} seconds"),
                ))
            }
        };
        let health_window = window("health_window_s", self.health_window_s)?;
        let overview_window = window("overview_window_s", self.overview_window_s)?;
        let mut urls = Vec::with_capacity(self.dispatcher_metrics_urls.len());
        for (index, text) in self.dispatcher_metrics_urls.iter().enumerate() {
            let field = format!("dispatcher_metrics_urls[{index}]");
            let url = Url::parse(text).map_err(|_| InsightError::config(&field, "is not a URL"))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(InsightError::config(&field, "must be an http or https URL"));
            }
            urls.push(url);
        }
        if self.consumer_group.trim().is_empty() {
            return Err(InsightError::config("consumer_group", "must not be empty"));
        }
        let topic = |field: &'static str, value: &Option<String>, suffix: &str| match value {
            Some(name) if name.trim().is_empty() => {
                Err(InsightError::config(field, "must not be empty"))
            }
            Some(name) => Ok(name.clone()),
            None => Ok(format!("{events_topic}.{suffix}")),
        };
        if self.max_attempt_records == 0 {
            return Err(InsightError::config(
                "max_attempt_records",
                "must be at least 1",
            ));
        }
        let millis = |field: &'static str, ms: u64| {
            if (1..=600_000).contains(&ms) {
                Ok(Duration::from_millis(ms))
            } else {
                Err(InsightError::config(
                    field,
                    "must be 1 to 600000 milliseconds",
                ))
            }
        };
        Ok(InsightSettings {
            health_window,
            overview_window,
            dispatcher_metrics_urls: urls,
            consumer_group: self.consumer_group.clone(),
            attempts_topic: topic("attempts_topic", &self.attempts_topic, "attempts")?,
            dlq_topic: topic("dlq_topic", &self.dlq_topic, "dlq")?,
            events_topic: events_topic.to_owned(),
            max_attempt_records: self.max_attempt_records,
            scrape_timeout: millis("scrape_timeout_ms", self.scrape_timeout_ms)?,
            read_timeout: millis("read_timeout_ms", self.read_timeout_ms)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(config: &InsightConfig) -> String {
        match config.to_settings("ev") {
            Err(InsightError::Config { field, .. }) => field,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn defaults_derive_the_topics_from_the_events_topic() {
        let settings = InsightConfig::default()
            .to_settings("webhook-events")
            .expect("the defaults are valid");
        assert_eq!(settings.health_window, Duration::from_secs(900));
        assert_eq!(settings.overview_window, Duration::from_secs(3600));
        assert_eq!(settings.attempts_topic, "webhook-events.attempts");
        assert_eq!(settings.dlq_topic, "webhook-events.dlq");
        assert_eq!(settings.consumer_group, "hookline-dispatcher");
        assert!(settings.dispatcher_metrics_urls.is_empty());
    }

    #[test]
    fn it_reads_from_toml_and_refuses_unknown_fields() {
        let config: InsightConfig = toml::from_str(
            r#"
            health_window_s = 300
            dispatcher_metrics_urls = ["http://10.0.0.5:9090/metrics"]
            consumer_group = "dispatchers"
            "#,
        )
        .expect("parses");
        let settings = config.to_settings("ev").expect("valid");
        assert_eq!(settings.health_window, Duration::from_secs(300));
        assert_eq!(settings.overview_window, Duration::from_secs(3600));
        assert_eq!(
            settings.dispatcher_metrics_urls[0].as_str(),
            "http://10.0.0.5:9090/metrics"
        );
        let unknown = toml::from_str::<InsightConfig>("health_window = 300");
        assert!(unknown.is_err());
    }

    #[test]
    fn errors_name_the_field() {
        let bad = |f: fn(&mut InsightConfig)| {
            let mut config = InsightConfig::default();
            f(&mut config);
            field_of(&config)
        };
        assert_eq!(
            bad(|c| c.health_window_s = 59),
            "console.insight.health_window_s"
        );
        assert_eq!(
            bad(|c| c.overview_window_s = 86_401),
            "console.insight.overview_window_s"
        );
        assert_eq!(
            bad(|c| c.dispatcher_metrics_urls = vec!["ftp://x/metrics".into()]),
            "console.insight.dispatcher_metrics_urls[0]"
        );
        assert_eq!(
            bad(|c| c.dispatcher_metrics_urls = vec!["http://ok/m".into(), "nope".into()]),
            "console.insight.dispatcher_metrics_urls[1]"
        );
        assert_eq!(
            bad(|c| c.consumer_group = " ".into()),
            "console.insight.consumer_group"
        );
        assert_eq!(
            bad(|c| c.attempts_topic = Some(String::new())),
            "console.insight.attempts_topic"
        );
        assert_eq!(
            bad(|c| c.max_attempt_records = 0),
            "console.insight.max_attempt_records"
        );
        assert_eq!(
            bad(|c| c.scrape_timeout_ms = 0),
            "console.insight.scrape_timeout_ms"
        );
    }
}
