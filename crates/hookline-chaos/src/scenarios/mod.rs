//! The scenarios, one file each, and the harness they share: a scenario's own topics and
//! group, its receivers, its replicas, a steady load, the DLQ followed, and at the end the
//! figures and the verdict.

pub mod broker;
pub mod endpoints;
pub mod kill;
pub mod poison;
pub mod registry;
pub mod rolling;
pub mod scale;

use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use hookline_core::signing::SigningSecret;
use hookline_kafka::{KafkaSettings, Registry, RegistrySettings};
use serde::Serialize;
use tokio::task::JoinHandle;

use crate::analysis::{self, Scope};
use crate::clock::Clock;
use crate::dlq::{DlqTail, Parked};
use crate::fixture::{Fixture, PARTITIONS};
use crate::load::{Body, Expect, Ledger, Load, Outgoing, Sender, event};
use crate::receiver::{Behaviour, Endpoint, Tally};
use crate::replicas::{DispatcherSettings, Replicas};
use crate::report::ScenarioReport;
use crate::timeline::Timeline;

/// The fixed retry backoff of every scenario, with tiers that hold it.
pub const BACKOFF_MS: u64 = 1000;
/// The retry tiers.
pub const TIERS: [&str; 2] = ["1s", "5s"];
/// `concurrency.max_uncommitted_per_partition`: the README's bound on what a crash or a
/// rebalance re-delivers per partition (the default, 5,000, would make it loose).
pub const WINDOW: u64 = 1000;

/// What every scenario runs against.
#[derive(Clone, Debug)]
pub struct Env {
    /// The `hookline` binary.
    pub hookline: PathBuf,
    /// `deploy/local/stack`.
    pub stack: PathBuf,
    /// Kafka.
    pub kafka: KafkaSettings,
    /// The registry's Confluent-compatible API.
    pub registry_url: String,
    /// The CI version: fewer events, shorter outages.
    pub short: bool,
    /// Where results and logs go (`target/chaos`).
    pub out: PathBuf,
    /// Leave topics and groups on the broker.
    pub keep_topics: bool,
    /// Extra librdkafka properties for every dispatcher.
    pub dispatcher_properties: Vec<(String, String)>,
}

impl Env {
    /// `short` in the CI version, `full` otherwise.
    pub fn pick<T>(&self, short: T, full: T) -> T {
        if self.short { short } else { full }
    }
}

/// A scenario while it runs.
pub struct Scenario<'a> {
    /// The environment.
    pub env: &'a Env,
    /// Its name, e.g. `kill-9`.
    pub name: &'static str,
    /// What it does.
    pub title: &'static str,
    /// A name unique to this run: topics, group and event ids derive from it.
    pub run: String,
    /// Its clock.
    pub clock: Clock,
    /// What it did when.
    pub timeline: Timeline,
    /// Its topics.
    pub fixture: Fixture,
    /// The receivers' records.
    pub tally: Arc<Tally>,
    /// What was published.
    pub ledger: Arc<Ledger>,
    /// Publishes its events.
    pub sender: Arc<Sender>,
    /// Its dispatchers.
    pub replicas: Replicas,
    /// Its receivers.
    pub endpoints: Vec<Endpoint>,
    /// Its parameters, for the report.
    pub settings: serde_json::Value,
    /// Remarks for the report.
    pub notes: Vec<String>,
    dlq: DlqTail,
    dir: PathBuf,
}

impl<'a> Scenario<'a> {
    /// Creates its topics, starts following its DLQ and prepares (not starts) replicas.
    pub async fn new(
        env: &'a Env,
        name: &'static str,
        title: &'static str,
    ) -> anyhow::Result<Self> {
        let clock = Clock::start();
        let timeline = Timeline::new(name, clock);
        let run = format!("chaos-{name}-{:08x}", rand::random::<u32>());
        let dir = env.out.join(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let tiers: Vec<String> = TIERS.iter().map(|t| (*t).to_owned()).collect();
        let fixture = Fixture::create(&env.kafka, &run, &tiers).await?;
        let registry = Arc::new(
            Registry::new(&RegistrySettings {
                url: env.registry_url.clone(),
                ..RegistrySettings::default()
            })
            .context("the registry client")?,
        );
        let ledger = Arc::new(Ledger::default());
        let sender = Arc::new(Sender::new(
            &env.kafka,
            Arc::clone(&registry),
            &fixture.topics.events,
            PARTITIONS,
            clock,
            Arc::clone(&ledger),
        )?);
        let dlq = DlqTail::start(
            &env.kafka,
            Arc::clone(&registry),
            &fixture.topics.dlq(),
            clock,
        )?;
        let settings = DispatcherSettings {
            group_id: format!("{run}-dispatchers"),
            bootstrap_servers: env.kafka.bootstrap_servers.clone(),
            registry_url: env.registry_url.clone(),
            events: fixture.topics.events.clone(),
            endpoints: fixture.topics.endpoints.clone(),
            tiers,
            backoff_ms: BACKOFF_MS,
            max_attempts: 30,
            timeout_ms: 2000,
            session_timeout_ms: 6000,
            shutdown_grace_ms: 10_000,
            max_uncommitted_per_partition: WINDOW,
            kafka_properties: env.dispatcher_properties.clone(),
        };
        let replicas = Replicas::new(&env.hookline, settings, &dir, timeline.clone());
        timeline.note(format!(
            "topics {} ({PARTITIONS} partitions)",
            fixture.topics.events
        ));
        Ok(Scenario {
            env,
            name,
            title,
            run,
            clock,
            timeline,
            fixture,
            tally: Arc::new(Tally::default()),
            ledger,
            sender,
            replicas,
            endpoints: Vec::new(),
            settings: serde_json::Value::Null,
            notes: Vec::new(),
            dlq,
            dir,
        })
    }

    /// Starts a receiver `name` with its own secret and puts it in the endpoint table;
    /// `healthy`: its events count in the longest stall.
    pub async fn endpoint(
        &mut self,
        name: &str,
        behaviour: Behaviour,
        healthy: bool,
    ) -> anyhow::Result<usize> {
        let secret = SigningSecret::generate(&mut rand::rng()).to_whsec();
        let mut endpoint =
            Endpoint::start(name, secret, behaviour, self.clock, Arc::clone(&self.tally)).await?;
        endpoint.healthy = healthy;
        self.fixture
            .put_endpoint(name, &endpoint.url(), endpoint.secret())
            .await?;
        self.endpoints.push(endpoint);
        Ok(self.endpoints.len() - 1)
    }

    /// Starts replicas in slots `0..n` and waits (up to 60 s) until each is ready.
    pub async fn start_replicas(&mut self, n: usize) -> anyhow::Result<()> {
        for slot in 0..n {
            self.replicas.start(slot)?;
        }
        for slot in 0..n {
            if !self
                .replicas
                .wait_ready(slot, Duration::from_secs(60))
                .await
            {
                self.timeline
                    .note(format!("slot {slot} not ready after 60 s"));
            }
        }
        Ok(())
    }

    /// Starts a steady load in the background.
    pub fn load<F>(&self, load: Load, make: F) -> JoinHandle<anyhow::Result<()>>
    where
        F: Fn(u64) -> Outgoing + Send + Sync + 'static,
    {
        self.timeline.note(format!(
            "load: {} events at {}/s",
            load.total, load.rate_per_s
        ));
        load.spawn(Arc::clone(&self.sender), make)
    }

    /// A steady load of `total` JSON events at `rate_per_s` to the healthy endpoint `ok`,
    /// each expected to be delivered.
    pub fn steady_load(&self, total: u64, rate_per_s: f64) -> JoinHandle<anyhow::Result<()>> {
        let run = self.run.clone();
        self.load(Load { total, rate_per_s }, move |n| Outgoing {
            event: event(&run, "ok", n),
            body: Body::Json,
            expect: Expect::Deliver,
        })
    }

    /// Waits for a load to be published in full.
    pub async fn published(&self, load: JoinHandle<anyhow::Result<()>>) -> anyhow::Result<()> {
        load.await.context("the load task")??;
        self.timeline
            .note(format!("published {}", self.ledger.all().len()));
        Ok(())
    }

    /// Waits until every published record was delivered or parked, at most `deadline`;
    /// then a little longer for stragglers (duplicates). Returns whether it settled.
    pub async fn settle(&mut self, deadline: Duration) -> bool {
        let give_up = tokio::time::Instant::now() + deadline;
        loop {
            self.replicas.check();
            let pending = self.pending();
            if pending == 0 {
                self.timeline.note("every record delivered or parked");
                tokio::time::sleep(Duration::from_secs(2)).await;
                return true;
            }
            if tokio::time::Instant::now() >= give_up {
                self.timeline
                    .note(format!("gave up waiting: {pending} records outstanding"));
                return false;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// What its DLQ holds so far.
    pub fn parked(&self) -> Vec<Parked> {
        self.dlq.parked()
    }

    fn pending(&self) -> usize {
        let parked = self.dlq.parked();
        let parked_ids: HashSet<&str> = parked.iter().map(|p| p.event_id.as_str()).collect();
        let parked_keys: HashSet<&str> = parked.iter().filter_map(|p| p.key.as_deref()).collect();
        self.ledger
            .all()
            .iter()
            .filter(|p| match &p.key {
                Some(key) => !parked_keys.contains(key.as_str()) && !self.tally.delivered(&p.id),
                None => !parked_ids.contains(p.id.as_str()) && !self.tally.delivered(&p.id),
            })
            .count()
    }

    /// Stops the replicas and computes the report. `moved` counts partitions that may have
    /// moved besides departures (a join takes its share; a broker restart may move all):
    /// each adds a window to the duplicate bound.
    pub async fn finish(mut self, moved: u64) -> ScenarioReport {
        self.replicas.check();
        let stopped_at = self.clock.now();
        self.replicas.stop_all().await;
        let published = self.ledger.all();
        let requests = self.tally.requests();
        let parked = self.dlq.parked();
        let healthy: HashSet<String> = self
            .endpoints
            .iter()
            .filter(|e| e.healthy)
            .map(|e| e.name().to_owned())
            .collect();
        let lateness: HashSet<String> = self
            .endpoints
            .iter()
            .filter(|e| e.lateness)
            .map(|e| e.name().to_owned())
            .collect();
        let backoff_s = BACKOFF_MS as f64 / 1000.0;
        let figures = analysis::figures(
            &published,
            &requests,
            &parked,
            &Scope {
                healthy: &healthy,
                lateness: &lateness,
                backoff_s,
                end: stopped_at,
            },
        );
        let finished = analysis::finish_times(&published, &requests, &parked);
        let departures: Vec<_> = self
            .replicas
            .departures()
            .iter()
            .map(|(at, name)| analysis::departure(*at, name, &published, &requests, &finished))
            .collect();
        let bound = departures
            .iter()
            .map(|d| d.partitions.len() as u64 * WINDOW + d.recent_deliveries as u64)
            .sum::<u64>()
            + moved * WINDOW;
        let names: Vec<String> = self.endpoints.iter().map(|e| e.name().to_owned()).collect();
        let wall_s = published
            .iter()
            .filter_map(|p| finished.get(&p.id))
            .copied()
            .fold(0.0, f64::max);
        let raw = [
            (
                "published.jsonl",
                write_lines(&self.dir.join("published.jsonl"), &published),
            ),
            (
                "requests.jsonl",
                write_lines(&self.dir.join("requests.jsonl"), &requests),
            ),
            (
                "parked.jsonl",
                write_lines(&self.dir.join("parked.jsonl"), &parked),
            ),
        ];
        for (file, result) in raw {
            if let Err(error) = result {
                self.notes
                    .push(format!("could not write {file}: {error:#}"));
            }
        }
        let mut report = ScenarioReport {
            name: self.name.to_owned(),
            title: self.title.to_owned(),
            settings: self.settings.clone(),
            duplicate_bound: bound,
            departures,
            partition_stalls: analysis::partition_stalls(
                &published, &finished, &healthy, stopped_at,
            ),
            endpoints: analysis::endpoint_figures(&names, &requests, backoff_s),
            dlq_undecodable: self.dlq.undecodable(),
            wall_s,
            notes: std::mem::take(&mut self.notes),
            logs: self.dir.display().to_string(),
            figures,
            ..ScenarioReport::default()
        };
        report.judge();
        report
            .failures
            .extend(self.replicas.problems().iter().cloned());
        report.timeline = self.timeline.all();
        // Before the topics go, or its consumer complains about them.
        self.dlq.stop().await;
        if !self.env.keep_topics
            && let Err(error) = self
                .fixture
                .remove(&self.env.kafka, &self.replicas.settings.group_id)
                .await
        {
            report
                .notes
                .push(format!("could not remove the topics: {error:#}"));
        }
        report
    }
}

fn write_lines<T: Serialize>(path: &Path, items: &[T]) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
    );
    for item in items {
        serde_json::to_writer(&mut out, item)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

/// Each endpoint's share of a load: `n` goes to the first endpoint whose cumulative weight
/// passes `n` modulo the total weight.
pub fn pick<'n>(shares: &[(&'n str, u64)], n: u64) -> &'n str {
    let total: u64 = shares.iter().map(|(_, weight)| weight).sum();
    let mut at = n % total.max(1);
    for (name, weight) in shares {
        if at < *weight {
            return name;
        }
        at -= weight;
    }
    shares.last().map_or("", |(name, _)| name)
}

/// A deterministic draw for `id`/`attempt`, true `percent`% of the time: the same request
/// gets the same answer on any run.
pub fn chance(id: &str, attempt: u32, percent: u64) -> bool {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.bytes().chain(attempt.to_le_bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    // The high bits mix best.
    (hash >> 32) % 100 < percent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_split_a_load_by_weight() {
        let shares = [("a", 3), ("b", 1)];
        let picked: Vec<&str> = (0..8).map(|n| pick(&shares, n)).collect();
        assert_eq!(picked, ["a", "a", "a", "b", "a", "a", "a", "b"]);
    }

    #[test]
    fn chances_come_out_near_their_share_and_are_stable() {
        for percent in [20, 50] {
            let hits = (0..10_000)
                .filter(|n| chance(&format!("evt-{n}"), 1, percent))
                .count();
            let expected = percent as usize * 100;
            assert!(hits.abs_diff(expected) < 500, "{percent}%: {hits}");
        }
        assert_eq!(chance("x", 2, 50), chance("x", 2, 50));
        assert!(!chance("x", 1, 0) && chance("x", 1, 100));
    }
}
