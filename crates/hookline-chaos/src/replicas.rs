//! The dispatcher replicas: real `hookline dispatch` processes, each with its own TOML
//! config and log file, started, killed (SIGKILL), stopped (SIGTERM, drained, exit 0) and
//! watched for deaths nobody asked for.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use toml::{Table, Value};

use crate::timeline::Timeline;

/// What every replica of a scenario is configured with.
#[derive(Clone, Debug)]
pub struct DispatcherSettings {
    /// The consumer group.
    pub group_id: String,
    /// Kafka.
    pub bootstrap_servers: String,
    /// The registry (or the fault proxy in front of it).
    pub registry_url: String,
    /// The events topic.
    pub events: String,
    /// The endpoint table.
    pub endpoints: String,
    /// Retry tiers.
    pub tiers: Vec<String>,
    /// The fixed backoff.
    pub backoff_ms: u64,
    /// Attempts in all.
    pub max_attempts: u32,
    /// One attempt's timeout.
    pub timeout_ms: u64,
    /// The group's session timeout.
    pub session_timeout_ms: u64,
    /// Drain deadline on SIGTERM and rebalance.
    pub shutdown_grace_ms: u64,
    /// The uncommitted window per partition.
    pub max_uncommitted_per_partition: u64,
    /// Extra librdkafka properties (`--dispatcher-property`).
    pub kafka_properties: Vec<(String, String)>,
}

impl DispatcherSettings {
    /// The config file of replica `name` (also its `user-agent`, so that the receivers
    /// know who sent what), with its admin port; written with `toml`, so that every value
    /// is escaped as TOML wants.
    pub fn toml(&self, name: &str, admin_port: u16) -> Result<String, toml::ser::Error> {
        let tiers: Vec<Value> = self.tiers.iter().map(|t| t.as_str().into()).collect();
        let properties: Table = self
            .kafka_properties
            .iter()
            .map(|(key, value)| (key.clone(), value.as_str().into()))
            .collect();
        let config = table([
            ("group_id", self.group_id.as_str().into()),
            ("group_protocol", "consumer".into()),
            ("session_timeout_ms", int(self.session_timeout_ms)),
            ("shutdown_grace_ms", int(self.shutdown_grace_ms)),
            ("dispatcher_id", name.into()),
            (
                "kafka",
                table([
                    ("bootstrap_servers", self.bootstrap_servers.as_str().into()),
                    ("properties", properties.into()),
                ])
                .into(),
            ),
            (
                "registry",
                table([("url", self.registry_url.as_str().into())]).into(),
            ),
            (
                "topics",
                table([
                    ("events", self.events.as_str().into()),
                    ("endpoints", self.endpoints.as_str().into()),
                    ("retry_tiers", tiers.into()),
                ])
                .into(),
            ),
            (
                "retry",
                table([
                    ("strategy", "fixed".into()),
                    ("base_ms", int(self.backoff_ms)),
                    ("cap_ms", int(self.backoff_ms)),
                    ("max_attempts", self.max_attempts.into()),
                ])
                .into(),
            ),
            (
                "http",
                table([
                    ("timeout_ms", int(self.timeout_ms)),
                    ("user_agent", name.into()),
                ])
                .into(),
            ),
            (
                "concurrency",
                table([(
                    "max_uncommitted_per_partition",
                    int(self.max_uncommitted_per_partition),
                )])
                .into(),
            ),
            ("outbound", table([("allow_loopback", true.into())]).into()),
            (
                "admin",
                table([("listen", format!("127.0.0.1:{admin_port}").into())]).into(),
            ),
        ]);
        Ok(format!(
            "# Written by hookline-chaos for one replica (its dispatcher_id).\n{}",
            toml::to_string(&config)?
        ))
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
fn int(n: u64) -> Value {
    Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

struct Replica {
    name: String,
    child: Child,
    admin_port: u16,
}

/// A scenario's replicas, by slot.
pub struct Replicas {
    hookline: PathBuf,
    /// What new replicas are started with.
    pub settings: DispatcherSettings,
    dir: PathBuf,
    timeline: Timeline,
    slots: Vec<Option<Replica>>,
    generation: u32,
    departures: Vec<(f64, String)>,
    problems: Vec<String>,
}

impl Replicas {
    /// No replicas yet; configs and logs go to `dir`.
    pub fn new(
        hookline: &Path,
        settings: DispatcherSettings,
        dir: &Path,
        timeline: Timeline,
    ) -> Self {
        Replicas {
            hookline: hookline.to_owned(),
            settings,
            dir: dir.to_owned(),
            timeline,
            slots: Vec::new(),
            generation: 0,
            departures: Vec::new(),
            problems: Vec::new(),
        }
    }

    /// Starts a new replica in `slot` (which must be empty); returns its name.
    pub fn start(&mut self, slot: usize) -> anyhow::Result<String> {
        if self.slots.len() <= slot {
            self.slots.resize_with(slot + 1, || None);
        }
        if self.slots[slot].is_some() {
            bail!("slot {slot} already runs a replica");
        }
        self.generation += 1;
        let name = format!("r{slot}.{}", self.generation);
        let admin_port = free_port()?;
        let config = self.dir.join(format!("{name}.toml"));
        let text = self
            .settings
            .toml(&name, admin_port)
            .context("writing the replica's config")?;
        std::fs::write(&config, text).with_context(|| format!("writing {}", config.display()))?;
        let log = self.dir.join(format!("{name}.log"));
        let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone().context("duplicating the log file")?;
        let child = Command::new(&self.hookline)
            // The command line wins over HOOKLINE_BOOTSTRAP_SERVERS and friends.
            .args(["--bootstrap-servers", &self.settings.bootstrap_servers])
            .args(["--registry-url", &self.settings.registry_url])
            .arg("dispatch")
            .arg("--config")
            .arg(&config)
            .env(
                "RUST_LOG",
                std::env::var("HOOKLINE_CHAOS_DISPATCHER_LOG")
                    .unwrap_or_else(|_| "info".to_owned()),
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.hookline.display()))?;
        self.timeline.note(format!("start {name}"));
        self.slots[slot] = Some(Replica {
            name: name.clone(),
            child,
            admin_port,
        });
        Ok(name)
    }

    /// Waits until the replica in `slot` answers `/readyz` with 200 (it has partitions);
    /// returns whether it did within `timeout`.
    pub async fn wait_ready(&self, slot: usize, timeout: Duration) -> bool {
        let Some(Some(replica)) = self.slots.get(slot) else {
            return false;
        };
        let Ok(client) = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(2))
            .build()
        else {
            return false;
        };
        let url = format!("http://127.0.0.1:{}/readyz", replica.admin_port);
        let give_up = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < give_up {
            if let Ok(response) = client.get(&url).send().await
                && response.status().as_u16() == 200
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    }

    /// SIGKILL to the replica in `slot`; returns its name.
    pub async fn kill(&mut self, slot: usize) -> anyhow::Result<String> {
        let mut replica = self.take(slot)?;
        replica.child.start_kill().context("sending SIGKILL")?;
        let at = self.timeline.note(format!("kill -9 {}", replica.name));
        replica
            .child
            .wait()
            .await
            .context("waiting for the killed replica")?;
        self.departures.push((at, replica.name.clone()));
        Ok(replica.name)
    }

    /// SIGTERM to the replica in `slot`, then waits for it to drain and exit; a replica
    /// that does not exit 0 within the grace period and 20 s more is a problem (and killed).
    pub async fn stop(&mut self, slot: usize) -> anyhow::Result<String> {
        let mut replica = self.take(slot)?;
        let pid = replica.child.id().context("the replica has no pid")?;
        let target = Pid::from_raw(i32::try_from(pid).context("the replica's pid")?);
        signal::kill(target, Signal::SIGTERM)
            .with_context(|| format!("kill -TERM {pid} failed"))?;
        let at = self.timeline.note(format!("SIGTERM {}", replica.name));
        self.departures.push((at, replica.name.clone()));
        let grace =
            Duration::from_millis(self.settings.shutdown_grace_ms) + Duration::from_secs(20);
        match tokio::time::timeout(grace, replica.child.wait()).await {
            Ok(Ok(status)) if status.success() => {
                self.timeline.note(format!("{} exited 0", replica.name));
            }
            Ok(Ok(status)) => {
                self.problem(format!(
                    "{} exited with {status} after SIGTERM",
                    replica.name
                ));
            }
            Ok(Err(error)) => self.problem(format!("waiting for {}: {error}", replica.name)),
            Err(_) => {
                let _ = replica.child.kill().await;
                self.problem(format!(
                    "{} did not exit within {grace:?} of SIGTERM",
                    replica.name
                ));
            }
        }
        Ok(replica.name)
    }

    /// Stops every replica still running (not counted as departures).
    pub async fn stop_all(&mut self) {
        for slot in 0..self.slots.len() {
            if self.slots[slot].is_some() && self.stop(slot).await.is_ok() {
                self.departures.pop();
            }
        }
    }

    /// Notes replicas that exited although nobody stopped them.
    pub fn check(&mut self) {
        for slot in 0..self.slots.len() {
            let exited = match self.slots[slot].as_mut().map(|r| r.child.try_wait()) {
                Some(Ok(Some(status))) => Some(status.to_string()),
                Some(Err(error)) => Some(error.to_string()),
                Some(Ok(None)) | None => None,
            };
            // Taken out only when it exited: dropping a running one would kill it.
            if let Some(status) = exited
                && let Some(replica) = self.slots[slot].take()
            {
                self.problem(format!(
                    "{} exited by itself ({status}); see its log",
                    replica.name
                ));
            }
        }
    }

    /// The kills and stops so far: when, and whom.
    pub fn departures(&self) -> &[(f64, String)] {
        &self.departures
    }

    /// What went wrong with the processes.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    fn problem(&mut self, problem: String) {
        self.timeline.note(format!("PROBLEM: {problem}"));
        self.problems.push(problem);
    }

    fn take(&mut self, slot: usize) -> anyhow::Result<Replica> {
        self.slots
            .get_mut(slot)
            .and_then(Option::take)
            .with_context(|| format!("no replica runs in slot {slot}"))
    }
}

/// A loopback port free right now (the dispatcher binds it a moment later).
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr().context("finding a free port")?.port())
}

#[cfg(test)]
mod tests {
    use hookline_dispatcher::DispatcherConfig;

    use super::*;

    #[test]
    fn the_config_is_one_the_dispatcher_takes() {
        let settings = DispatcherSettings {
            group_id: "g".to_owned(),
            bootstrap_servers: "127.0.0.1:29092".to_owned(),
            registry_url: "http://127.0.0.1:28081/apis/ccompat/v7".to_owned(),
            events: "t-chaos-events".to_owned(),
            endpoints: "t-chaos-endpoints".to_owned(),
            tiers: vec!["1s".to_owned(), "5s".to_owned()],
            backoff_ms: 1000,
            max_attempts: 30,
            timeout_ms: 2000,
            session_timeout_ms: 6000,
            shutdown_grace_ms: 10_000,
            max_uncommitted_per_partition: 1000,
            kafka_properties: vec![("group.remote.assignor".to_owned(), "range".to_owned())],
        };
        let file = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
        std::fs::write(file.path(), settings.toml("r0.1", 12345).unwrap()).unwrap();
        let config = DispatcherConfig::load(Some(file.path())).unwrap();
        assert_eq!(config.session_timeout_ms, Some(6000));
        assert_eq!(config.dispatcher_id.as_deref(), Some("r0.1"));
        assert_eq!(config.http.user_agent, "r0.1");
        assert_eq!(config.retry.cap_ms, 1000);
        assert_eq!(config.topics.retry_tiers, ["1s", "5s"]);
        assert_eq!(config.admin.listen, "127.0.0.1:12345");
        assert_eq!(config.kafka.properties["group.remote.assignor"], "range");
        config.into_settings().expect("valid");
    }

    #[test]
    fn values_are_escaped_and_read_back_as_written() {
        let settings = DispatcherSettings {
            group_id: r#"g "quoted" \ slashed"#.to_owned(),
            bootstrap_servers: "127.0.0.1:29092".to_owned(),
            registry_url: r"http://r/C:\dir\".to_owned(),
            events: "t-chaos-events".to_owned(),
            endpoints: "t-chaos-endpoints".to_owned(),
            tiers: vec!["1s".to_owned()],
            backoff_ms: 1000,
            max_attempts: 30,
            timeout_ms: 2000,
            session_timeout_ms: 6000,
            shutdown_grace_ms: 10_000,
            max_uncommitted_per_partition: 1000,
            kafka_properties: vec![("sasl.jaas \"x\"".to_owned(), "line\nbreak = 'q'".to_owned())],
        };
        let text = settings.toml("r0.1", 12345).expect("the config renders");
        let back: Table = text.parse().expect("the config is TOML");
        assert_eq!(back["group_id"].as_str(), Some(r#"g "quoted" \ slashed"#));
        assert_eq!(back["registry"]["url"].as_str(), Some(r"http://r/C:\dir\"));
        assert_eq!(
            back["kafka"]["properties"]["sasl.jaas \"x\""].as_str(),
            Some("line\nbreak = 'q'")
        );
        assert_eq!(back["retry"]["max_attempts"].as_integer(), Some(30));
        assert_eq!(back["http"]["user_agent"].as_str(), Some("r0.1"));
        assert_eq!(back["admin"]["listen"].as_str(), Some("127.0.0.1:12345"));
    }
}
