//! A benchmark run: the fixtures, then `rounds` rounds, each from fresh consumer groups:
//! the baseline and hookline over the same direct backlog, then (unless skipped) hookline
//! over the fan-out backlog on the round's own events topic; then the report.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use hookline_kafka::KafkaSettings;
use hookline_producer::Topics;
use tokio::process::Command;

use crate::BenchArgs;
use crate::fixture::{self, FanoutFixture, Fixture};
use crate::machine::{Machine, Versions};
use crate::process::Contestant;
use crate::report::{Deliveries, Kind, Report, RunResult, Workload};
use crate::sink::Sink;

/// How long a contestant may take to drain and exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(20);
/// hookline's default `concurrency.max_pending`, which the benchmark keeps.
const HOOKLINE_MAX_PENDING: usize = 2048;
/// A pause between runs, so that one run's shutdown does not weigh on the next.
const SETTLE: Duration = Duration::from_secs(1);
/// Most deliveries in one fan-out run.
const MAX_FANOUT_DELIVERIES: u64 = 10_000_000;

/// Runs the benchmark and prints the report.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let hookline = std::path::absolute(&args.hookline).context("the hookline path")?;
    let versions = Versions::detect(&hookline, &args.label)?;
    let machine = Machine::detect();
    let kafka = KafkaSettings::new(&args.bootstrap_servers);
    let payload_bytes = usize::try_from(args.payload_bytes).context("--payload-bytes")?;

    let sink = Sink::start().await?;
    note(&format!("publishing {} events", args.events));
    let started = Instant::now();
    let fixture = Fixture::create(&kafka, &sink.url(), args.events, payload_bytes)
        .await
        .context("setting up the fixture")?;
    note(&format!(
        "backlog ready in {:.1} s on {}",
        started.elapsed().as_secs_f64(),
        fixture.topics.events
    ));
    let fanout = match fanout_fixture(&args, &kafka, &sink, payload_bytes).await {
        Ok(fanout) => fanout,
        Err(error) => {
            if !args.keep_topics
                && let Err(error) = fixture::remove(&kafka, &fixture.created, &[]).await
            {
                note(&format!("could not remove the fixture: {error:#}"));
            }
            return Err(error);
        }
    };

    let workdir = tempfile::Builder::new()
        .prefix("hookline-bench-")
        .tempdir()
        .context("creating a work directory")?;
    let mut groups = Vec::new();
    let measured = rounds(
        &args,
        &hookline,
        &fixture,
        fanout.as_ref(),
        &sink,
        workdir.path(),
        &mut groups,
    )
    .await;
    if measured.is_err() {
        // The logs are the only account of what went wrong: leave them.
        note(&format!(
            "contestant logs kept in {}",
            workdir.keep().display()
        ));
    }
    let mut topics = fixture.created.clone();
    topics.extend(
        fanout
            .iter()
            .flat_map(|fanout| fanout.created.iter().cloned()),
    );
    if !args.keep_topics
        && let Err(error) = fixture::remove(&kafka, &topics, &groups).await
    {
        note(&format!("could not remove the fixtures: {error:#}"));
    }
    let runs = measured?;

    let report = Report::new(
        machine,
        versions,
        Workload {
            events: args.events,
            partitions: fixture::PARTITIONS,
            concurrency: args.concurrency,
            payload_bytes: args.payload_bytes,
            rounds: args.rounds,
            fanout_events: fanout.as_ref().map_or(0, |fanout| fanout.events),
            fanout_endpoints: fanout.as_ref().map_or(0, |fanout| fanout.endpoints),
            hookline_overrides: hookline_overrides(),
        },
        runs,
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(())
}

/// The fan-out fixture, unless `--fanout-events 0` skips the scenario.
async fn fanout_fixture(
    args: &BenchArgs,
    kafka: &KafkaSettings,
    sink: &Sink,
    payload_bytes: usize,
) -> anyhow::Result<Option<FanoutFixture>> {
    if args.fanout_events == 0 {
        return Ok(None);
    }
    if args.fanout_events.saturating_mul(args.fanout_endpoints) > MAX_FANOUT_DELIVERIES {
        bail!(
            "--fanout-events times --fanout-endpoints must be at most {MAX_FANOUT_DELIVERIES} \
             (the sink keeps every delivery's key)"
        );
    }
    note(&format!(
        "publishing {} tenant events for {} endpoints",
        args.fanout_events, args.fanout_endpoints
    ));
    let started = Instant::now();
    let fanout = FanoutFixture::create(
        kafka,
        &sink.url(),
        args.fanout_events,
        args.fanout_endpoints,
        args.rounds,
        payload_bytes,
    )
    .await
    .context("setting up the fan-out fixture")?;
    note(&format!(
        "fan-out backlog ready in {:.1} s on {}",
        started.elapsed().as_secs_f64(),
        fanout.fanout_topic
    ));
    Ok(Some(fanout))
}

async fn rounds(
    args: &BenchArgs,
    hookline: &Path,
    fixture: &Fixture,
    fanout: Option<&FanoutFixture>,
    sink: &Sink,
    workdir: &Path,
    groups: &mut Vec<String>,
) -> anyhow::Result<Vec<RunResult>> {
    let mut runs = Vec::new();
    for round in 1..=args.rounds {
        let mut kinds = vec![Kind::Baseline, Kind::Hookline];
        if !args.skip_attempt_log_cost {
            kinds.push(Kind::NoAttemptLog);
        }
        kinds.extend(fanout.map(|_| Kind::Fanout));
        for kind in kinds {
            let backlog = match kind {
                Kind::Baseline | Kind::Hookline | Kind::NoAttemptLog => Backlog {
                    topics: fixture.topics.clone(),
                    fanout_topic: None,
                    events: fixture.events,
                    deliveries: fixture.events,
                },
                Kind::Fanout => {
                    let fanout = fanout.context("a fan-out run without its fixture")?;
                    Backlog {
                        topics: fanout.round_topics(round)?,
                        fanout_topic: Some(&fanout.fanout_topic),
                        events: fanout.events,
                        deliveries: fanout.deliveries(),
                    }
                }
            };
            let group = format!("{}-{}-{round}", backlog.topics.events, kind.name());
            groups.push(group.clone());
            if kind != Kind::Baseline {
                // The fan-out stage's own group (idle in the direct runs).
                groups.push(format!("{group}.fanout"));
            }
            let run = Run {
                args,
                backlog,
                sink,
                kind,
                round,
                group,
                workdir,
                admin_port: free_port()?,
            };
            let command = match kind {
                Kind::Baseline => run.baseline_command()?,
                Kind::Hookline | Kind::NoAttemptLog | Kind::Fanout => {
                    run.hookline_command(hookline)?
                }
            };
            let result = run
                .measure(command)
                .await
                .with_context(|| format!("{} run {round}", kind.name()))?;
            note(&format!(
                "{} #{round}: {:.2} s, {:.0} deliveries/s, {:.1} MiB peak RSS",
                kind.name(),
                result.wall_s,
                result.deliveries_per_s,
                result.peak_rss_mib
            ));
            runs.push(result);
            tokio::time::sleep(SETTLE).await;
        }
    }
    Ok(runs)
}

/// What one run reads and must deliver.
struct Backlog<'a> {
    /// Its events topic and endpoint table.
    topics: Topics,
    /// The fan-out topic, in a fan-out run (the direct runs keep the default, which holds
    /// no events).
    fanout_topic: Option<&'a str>,
    /// Events in the backlog.
    events: u64,
    /// Deliveries the sink waits for.
    deliveries: u64,
}

/// One run of one contestant.
struct Run<'a> {
    args: &'a BenchArgs,
    backlog: Backlog<'a>,
    sink: &'a Sink,
    kind: Kind,
    round: u32,
    group: String,
    workdir: &'a Path,
    /// hookline's admin port.
    admin_port: u16,
}

impl Run<'_> {
    fn baseline_command(&self) -> anyhow::Result<Command> {
        let mut command =
            Command::new(std::env::current_exe().context("this benchmark's own path")?);
        command
            .arg("baseline")
            .args(["--bootstrap-servers", &self.args.bootstrap_servers])
            .args(["--topic", &self.backlog.topics.events])
            .args(["--group-id", &self.group])
            .args(["--url", &self.sink.url()])
            .args(["--concurrency", &self.args.concurrency.to_string()]);
        Ok(command)
    }

    fn hookline_command(&self, hookline: &Path) -> anyhow::Result<Command> {
        let config = self
            .workdir
            .join(format!("{}-{}.toml", self.kind.name(), self.round));
        std::fs::write(&config, self.hookline_config())
            .with_context(|| format!("writing {}", config.display()))?;
        let mut command = Command::new(hookline);
        command
            .args(["--bootstrap-servers", &self.args.bootstrap_servers])
            .args(["--registry-url", &self.args.registry_url])
            .args(["--events-topic", &self.backlog.topics.events])
            .args(["--endpoints-topic", &self.backlog.topics.endpoints])
            .arg("dispatch")
            .arg("--config")
            .arg(&config);
        Ok(command)
    }

    /// The dispatcher's config: the fixture's topics, the same concurrency as the
    /// baseline, loopback allowed, an admin port to read its metrics from; everything else
    /// at its default, the fan-out stage included (a fan-out run names the fan-out topic,
    /// as its events topic is the round's own) and, but in a no-log run, the attempt log.
    /// `HOOKLINE_<SECTION>__<KEY>` variables still
    /// override this file (and are listed in the report).
    fn hookline_config(&self) -> String {
        let topics = &self.backlog.topics;
        let fanout = self
            .backlog
            .fanout_topic
            .map(|topic| format!("\n[fanout]\ntopic = \"{topic}\"\n"))
            .unwrap_or_default();
        let attempts = if self.kind == Kind::NoAttemptLog {
            "\n[attempts]\nenabled = false\n"
        } else {
            ""
        };
        format!(
            r#"group_id = "{group}"
shutdown_grace_ms = 10000

[kafka]
bootstrap_servers = "{bootstrap}"

[registry]
url = "{registry}"

[topics]
events = "{events}"
endpoints = "{endpoints}"
retry_tiers = ["{tier}"]

[retry]
cap_ms = {cap_ms}

[concurrency]
per_endpoint = {concurrency}
max_pending = {pending}

[outbound]
allow_loopback = true

[admin]
listen = "127.0.0.1:{admin}"
{fanout}{attempts}"#,
            admin = self.admin_port,
            group = self.group,
            bootstrap = self.args.bootstrap_servers,
            registry = self.args.registry_url,
            events = topics.events,
            endpoints = topics.endpoints,
            tier = fixture::RETRY_TIER,
            cap_ms = hookline_core::policy::parse_suffix(fixture::RETRY_TIER)
                .map_or(1_000, |delay| delay.as_millis()),
            concurrency = self.args.concurrency,
            pending = HOOKLINE_MAX_PENDING,
        )
    }

    async fn measure(&self, command: Command) -> anyhow::Result<RunResult> {
        let (events, deliveries) = (self.backlog.events, self.backlog.deliveries);
        self.sink.reset(deliveries);
        let log = self
            .workdir
            .join(format!("{}-{}.log", self.kind.name(), self.round));
        let started = Instant::now();
        let mut contestant = Contestant::spawn(command, &log)?;
        let timeout = Duration::from_secs(self.args.run_timeout_s);
        tokio::select! {
            all = self.sink.wait_all(timeout) => if !all {
                bail!(
                    "only {} of {deliveries} deliveries arrived within {timeout:?}\n{}",
                    self.sink.seen().distinct,
                    contestant.log_tail()
                );
            },
            exit = contestant.exited() => bail!(
                "it exited ({}) before making every delivery\n{}",
                exit.map_or_else(|error| error.to_string(), |status| status.to_string()),
                contestant.log_tail()
            ),
        }
        let sample = contestant.sample()?;
        let hookline_deliveries = match self.kind {
            Kind::Baseline => None,
            Kind::Hookline | Kind::NoAttemptLog | Kind::Fanout => self.deliveries().await,
        };
        let status = contestant.terminate(STOP_GRACE).await?;
        if !status.success() {
            bail!(
                "it exited with {status} after SIGTERM\n{}",
                super::process::log_tail(&log)
            );
        }

        let seen = self.sink.seen();
        let since_start =
            |at: Option<Instant>| at.map_or(f64::NAN, |at| (at - started).as_secs_f64());
        let wall_s = since_start(seen.all_at);
        // Per event: the deliveries after the first, over the deliveries each event makes.
        let events_per_delivery = events as f64 / deliveries as f64;
        Ok(RunResult {
            contestant: self.kind,
            round: self.round,
            events,
            deliveries,
            wall_s,
            events_per_s: events as f64 / wall_s,
            deliveries_per_s: deliveries as f64 / wall_s,
            first_delivery_s: since_start(seen.first_at),
            after_first_events_per_s: match (seen.first_at, seen.all_at) {
                (Some(first), Some(all)) if all > first => {
                    deliveries.saturating_sub(1) as f64 * events_per_delivery
                        / (all - first).as_secs_f64()
                }
                _ => f64::NAN,
            },
            peak_rss_mib: sample.peak_rss_kib as f64 / 1024.0,
            cpu_s: sample.cpu_s,
            cpu_ms_per_1k_events: sample.cpu_s * 1000.0 / (events as f64 / 1000.0),
            cpu_ms_per_1k_deliveries: sample.cpu_s * 1000.0 / (deliveries as f64 / 1000.0),
            requests: seen.requests,
            hookline_deliveries,
        })
    }

    /// `webhook_delivery_total` by status and `webhook_fanout_deliveries_total`, from
    /// hookline's admin port.
    async fn deliveries(&self) -> Option<Deliveries> {
        let text = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(5))
            .build()
            .ok()?
            .get(format!("http://127.0.0.1:{}/metrics", self.admin_port))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        let value = |series: &str| {
            let prefix = format!("{series} ");
            text.lines()
                .find_map(|line| line.strip_prefix(&prefix))
                .and_then(|value| value.trim().parse::<f64>().ok())
                .map_or(0, |value| value as u64)
        };
        let count = |status: &str| value(&format!("webhook_delivery_total{{status=\"{status}\"}}"));
        Some(Deliveries {
            succeeded: count("succeeded"),
            retry_scheduled: count("retry_scheduled"),
            dlq: count("dlq"),
            fanned_out: value("webhook_fanout_deliveries_total"),
        })
    }
}

/// `HOOKLINE_<SECTION>__<KEY>` variables the dispatcher will see, as `KEY=VALUE`.
pub fn hookline_overrides() -> Vec<String> {
    let mut overrides: Vec<String> = std::env::vars()
        .filter(|(key, _)| key.starts_with("HOOKLINE_") && key.contains("__"))
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    overrides.sort();
    overrides
}

/// A loopback port free right now (the dispatcher binds it a moment later).
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr().context("finding a free port")?.port())
}

fn note(message: &str) {
    eprintln!("hookline-bench: {message}");
}
