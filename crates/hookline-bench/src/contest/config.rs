//! The dispatcher's config for one run: its topics, concurrency and retry settings, loopback
//! allowed, an admin port to read its metrics from; everything else at its default.
//! `HOOKLINE_<SECTION>__<KEY>` variables still override the file (the report lists them).

use std::path::Path;

use anyhow::Context as _;
use hookline_producer::Topics;
use tokio::process::Command;
use toml::{Table, Value};

/// hookline's default `concurrency.max_pending`, which most runs keep.
pub const HOOKLINE_MAX_PENDING: usize = 2048;

/// What one run of `hookline dispatch` is given.
#[derive(Clone, Debug)]
pub struct HooklineConfig {
    /// The consumer group.
    pub group: String,
    /// Kafka brokers.
    pub bootstrap: String,
    /// The schema registry.
    pub registry: String,
    /// The run's topics.
    pub topics: Topics,
    /// Its retry tiers, as suffixes.
    pub tiers: Vec<String>,
    /// The admin port.
    pub admin_port: u16,
    /// `concurrency.per_endpoint`.
    pub per_endpoint: u32,
    /// `concurrency.max_in_flight`; `None` keeps the default.
    pub max_in_flight: Option<usize>,
    /// `concurrency.max_pending`.
    pub max_pending: usize,
    /// `concurrency.per_endpoint_queue`; `None` keeps the default.
    pub per_endpoint_queue: Option<usize>,
    /// `http.timeout_ms`; `None` keeps the default.
    pub timeout_ms: Option<u64>,
    /// A fixed retry delay, in milliseconds (`[retry] strategy = "fixed"`); `None` keeps the
    /// default strategy with `cap_ms` at the largest tier.
    pub fixed_retry_ms: Option<u64>,
    /// Turn the circuit breaker off (`breaker.minimum_requests = 0`).
    pub breaker_off: bool,
    /// The fan-out topic, in a fan-out run.
    pub fanout_topic: Option<String>,
    /// The attempt log on (the default) or off.
    pub attempts: bool,
}

impl HooklineConfig {
    /// A config with hookline's defaults but for the topics, group and port.
    pub fn new(
        group: String,
        bootstrap: &str,
        registry: &str,
        topics: Topics,
        tiers: &[String],
        admin_port: u16,
    ) -> Self {
        HooklineConfig {
            group,
            bootstrap: bootstrap.to_owned(),
            registry: registry.to_owned(),
            topics,
            tiers: tiers.to_vec(),
            admin_port,
            per_endpoint: 16,
            max_in_flight: None,
            max_pending: HOOKLINE_MAX_PENDING,
            per_endpoint_queue: None,
            timeout_ms: None,
            fixed_retry_ms: None,
            breaker_off: false,
            fanout_topic: None,
            attempts: true,
        }
    }

    /// The TOML file, written with `toml` so that every value is escaped as TOML wants.
    pub fn render(&self) -> Result<String, toml::ser::Error> {
        let largest_ms = self
            .tiers
            .iter()
            .filter_map(|tier| hookline_core::policy::parse_suffix(tier).ok())
            .map(|delay| delay.as_millis())
            .max()
            .unwrap_or(1_000);
        let retry = match self.fixed_retry_ms {
            Some(delay) => table([
                ("strategy", "fixed".into()),
                ("base_ms", int(delay)),
                ("cap_ms", int(largest_ms.max(u128::from(delay)))),
            ]),
            None => table([("cap_ms", int(largest_ms))]),
        };
        let mut concurrency = table([
            ("per_endpoint", self.per_endpoint.into()),
            ("max_pending", int(self.max_pending)),
        ]);
        if let Some(max) = self.max_in_flight {
            concurrency.insert("max_in_flight".to_owned(), int(max));
        }
        if let Some(queue) = self.per_endpoint_queue {
            concurrency.insert("per_endpoint_queue".to_owned(), int(queue));
        }
        let tiers: Vec<Value> = self.tiers.iter().map(|tier| tier.as_str().into()).collect();
        let mut config = table([
            ("group_id", self.group.as_str().into()),
            ("shutdown_grace_ms", 10_000.into()),
            (
                "kafka",
                table([("bootstrap_servers", self.bootstrap.as_str().into())]).into(),
            ),
            (
                "registry",
                table([("url", self.registry.as_str().into())]).into(),
            ),
            (
                "topics",
                table([
                    ("events", self.topics.events.as_str().into()),
                    ("endpoints", self.topics.endpoints.as_str().into()),
                    ("retry_tiers", tiers.into()),
                ])
                .into(),
            ),
            ("outbound", table([("allow_loopback", true.into())]).into()),
            (
                "admin",
                table([("listen", format!("127.0.0.1:{}", self.admin_port).into())]).into(),
            ),
            ("retry", retry.into()),
            ("concurrency", concurrency.into()),
        ]);
        if let Some(timeout) = self.timeout_ms {
            config.insert(
                "http".to_owned(),
                table([("timeout_ms", int(timeout))]).into(),
            );
        }
        if self.breaker_off {
            config.insert(
                "breaker".to_owned(),
                table([("minimum_requests", 0.into())]).into(),
            );
        }
        if let Some(topic) = &self.fanout_topic {
            config.insert(
                "fanout".to_owned(),
                table([("topic", topic.as_str().into())]).into(),
            );
        }
        if !self.attempts {
            config.insert(
                "attempts".to_owned(),
                table([("enabled", false.into())]).into(),
            );
        }
        toml::to_string(&config)
    }

    /// `hookline ... dispatch --config <file>`, the file written as `config_path`.
    pub fn command(&self, hookline: &Path, config_path: &Path) -> anyhow::Result<Command> {
        let text = self.render().context("writing the dispatcher's config")?;
        std::fs::write(config_path, text)
            .with_context(|| format!("writing {}", config_path.display()))?;
        let mut command = Command::new(hookline);
        command
            .args(["--bootstrap-servers", &self.bootstrap])
            .args(["--registry-url", &self.registry])
            .args(["--events-topic", &self.topics.events])
            .args(["--endpoints-topic", &self.topics.endpoints])
            .arg("dispatch")
            .arg("--config")
            .arg(config_path);
        Ok(command)
    }
}

/// A TOML table of `pairs`.
fn table<const N: usize>(pairs: [(&str, Value); N]) -> Table {
    pairs
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
}

/// A TOML integer; saturating, as no setting comes near 2^63.
fn int(n: impl TryInto<i64>) -> Value {
    Value::Integer(n.try_into().unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_runs_topics_tiers_and_knobs() {
        let mut config = HooklineConfig::new(
            "g".to_owned(),
            "127.0.0.1:9092",
            "http://r",
            crate::fixture::run_topics("b-retry-r1"),
            &["1s".to_owned(), "5s".to_owned()],
            4242,
        );
        config.fixed_retry_ms = Some(1000);
        config.breaker_off = true;
        config.max_in_flight = Some(2000);
        let toml = config.render().expect("the config renders");
        for line in [
            "events = \"b-retry-r1\"",
            "endpoints = \"b-retry-r1-endpoints\"",
            "retry_tiers = [\"1s\", \"5s\"]",
            "strategy = \"fixed\"",
            "base_ms = 1000",
            "cap_ms = 5000",
            "max_in_flight = 2000",
            "minimum_requests = 0",
            "listen = \"127.0.0.1:4242\"",
        ] {
            assert!(
                toml.lines().any(|l| l == line),
                "{line} missing from\n{toml}"
            );
        }
        assert!(!toml.contains("[attempts]"));
    }

    #[test]
    fn values_are_escaped_and_read_back_as_written() {
        let mut config = HooklineConfig::new(
            r#"g "quoted" \ slashed"#.to_owned(),
            "127.0.0.1:9092",
            r"http://r/C:\dir\",
            crate::fixture::run_topics("b-direct-r1"),
            &["1s".to_owned()],
            4242,
        );
        config.attempts = false;
        config.fanout_topic = Some("f\nline".to_owned());
        let text = config.render().expect("the config renders");
        let back: Table = text.parse().expect("the config is TOML");
        assert_eq!(back["group_id"].as_str(), Some(r#"g "quoted" \ slashed"#));
        assert_eq!(back["registry"]["url"].as_str(), Some(r"http://r/C:\dir\"));
        assert_eq!(back["fanout"]["topic"].as_str(), Some("f\nline"));
        assert_eq!(back["shutdown_grace_ms"].as_integer(), Some(10_000));
        assert_eq!(back["retry"]["cap_ms"].as_integer(), Some(1_000));
        assert_eq!(back["concurrency"]["max_pending"].as_integer(), Some(2048));
        assert_eq!(back["attempts"]["enabled"].as_bool(), Some(false));
        assert!(back["retry"].get("strategy").is_none());
    }
}
