//! The dispatcher's config for one run: its topics, concurrency and retry settings, loopback
//! allowed, an admin port to read its metrics from; everything else at its default.
//! `HOOKLINE_<SECTION>__<KEY>` variables still override the file (the report lists them).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use hookline_producer::Topics;
use tokio::process::Command;

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

    /// The TOML file.
    pub fn render(&self) -> String {
        let tiers = self
            .tiers
            .iter()
            .map(|tier| format!("\"{tier}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let largest_ms = self
            .tiers
            .iter()
            .filter_map(|tier| hookline_core::policy::parse_suffix(tier).ok())
            .map(|delay| delay.as_millis())
            .max()
            .unwrap_or(1_000);
        let mut out = format!(
            r#"group_id = "{group}"
shutdown_grace_ms = 10000

[kafka]
bootstrap_servers = "{bootstrap}"

[registry]
url = "{registry}"

[topics]
events = "{events}"
endpoints = "{endpoints}"
retry_tiers = [{tiers}]

[outbound]
allow_loopback = true

[admin]
listen = "127.0.0.1:{admin}"
"#,
            group = self.group,
            bootstrap = self.bootstrap,
            registry = self.registry,
            events = self.topics.events,
            endpoints = self.topics.endpoints,
            admin = self.admin_port,
        );
        match self.fixed_retry_ms {
            Some(delay) => {
                let _ = write!(
                    out,
                    "\n[retry]\nstrategy = \"fixed\"\nbase_ms = {delay}\ncap_ms = {}\n",
                    largest_ms.max(u128::from(delay))
                );
            }
            None => {
                let _ = write!(out, "\n[retry]\ncap_ms = {largest_ms}\n");
            }
        }
        let _ = write!(
            out,
            "\n[concurrency]\nper_endpoint = {}\nmax_pending = {}\n",
            self.per_endpoint, self.max_pending
        );
        if let Some(max) = self.max_in_flight {
            let _ = writeln!(out, "max_in_flight = {max}");
        }
        if let Some(queue) = self.per_endpoint_queue {
            let _ = writeln!(out, "per_endpoint_queue = {queue}");
        }
        if let Some(timeout) = self.timeout_ms {
            let _ = write!(out, "\n[http]\ntimeout_ms = {timeout}\n");
        }
        if self.breaker_off {
            out.push_str("\n[breaker]\nminimum_requests = 0\n");
        }
        if let Some(topic) = &self.fanout_topic {
            let _ = write!(out, "\n[fanout]\ntopic = \"{topic}\"\n");
        }
        if !self.attempts {
            out.push_str("\n[attempts]\nenabled = false\n");
        }
        out
    }

    /// `hookline ... dispatch --config <file>`, the file written as `config_path`.
    pub fn command(&self, hookline: &Path, config_path: &Path) -> anyhow::Result<Command> {
        std::fs::write(config_path, self.render())
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
        let toml = config.render();
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
}
