//! One measured run of one contestant: the sink reset for the run's deliveries, the process
//! started, waited for, sampled (CPU, peak RSS, hookline's own counts) and stopped.

mod config;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use hookline_kafka::KafkaSettings;
use serde::Serialize;
use tokio::process::Command;

pub use config::{HOOKLINE_MAX_PENDING, HooklineConfig};

use crate::broker::Broker;
use crate::process::{Contestant, Sample};
use crate::sink::Sink;
use crate::stats::Percentiles;

/// How long a contestant may take to drain and exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// What every run needs: the stack, the sink, the binaries, a place for logs.
pub struct Ctx<'a> {
    /// Kafka, for the fixtures.
    pub kafka: KafkaSettings,
    /// Kafka brokers, for the contestants.
    pub bootstrap: String,
    /// The schema registry.
    pub registry: String,
    /// The sink.
    pub sink: &'a Sink,
    /// The `hookline` binary.
    pub hookline: PathBuf,
    /// Logs and config files.
    pub workdir: &'a Path,
    /// Most time one run may take.
    pub run_timeout: Duration,
    /// Unique base of every topic name of this benchmark.
    pub base: String,
    /// The broker, when it runs on this machine (its CPU time is measured per run).
    pub broker: Option<Broker>,
}

impl Ctx<'_> {
    /// A `hookline dispatch` config for a run on `topics`, group named after the run.
    pub fn hookline_config(
        &self,
        run: &str,
        topics: &hookline_producer::Topics,
        tiers: &[String],
    ) -> anyhow::Result<HooklineConfig> {
        Ok(HooklineConfig::new(
            format!("{}-{run}", topics.events),
            &self.bootstrap,
            &self.registry,
            topics.clone(),
            tiers,
            free_port()?,
        ))
    }

    /// The command running `config`, its file in the work directory.
    pub fn hookline_command(&self, run: &str, config: &HooklineConfig) -> anyhow::Result<Command> {
        config.command(&self.hookline, &self.workdir.join(format!("{run}.toml")))
    }
}

/// What one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    /// Deliveries the sink waited for.
    pub deliveries: u64,
    /// From starting the process until the sink had every delivery, in seconds.
    pub wall_s: f64,
    /// Deliveries over `wall_s`.
    pub deliveries_per_s: f64,
    /// From starting the process until the first request, in seconds.
    pub first_delivery_s: f64,
    /// Deliveries after the first over the time from the first to the last.
    pub after_first_per_s: f64,
    /// Peak RSS (VmHWM) just before SIGTERM, in MiB.
    pub peak_rss_mib: f64,
    /// User plus system CPU time just before SIGTERM, in seconds.
    pub cpu_s: f64,
    /// `cpu_s` per 1000 deliveries, in milliseconds.
    pub cpu_ms_per_1k_deliveries: f64,
    /// The CPU time from the first delivery on, per 1000 deliveries after the first, in
    /// milliseconds: the start-up (building clients, joining the group) left out, as in
    /// `after_first_per_s`. NaN when the first delivery was not seen.
    pub cpu_ms_per_1k_after_first: f64,
    /// The broker's CPU time over the same span, in seconds (its idle work included), when
    /// the broker runs on this machine.
    pub broker_cpu_s: Option<f64>,
    /// `broker_cpu_s` per 1000 deliveries, in milliseconds.
    pub broker_cpu_ms_per_1k_deliveries: Option<f64>,
    /// HTTP requests the sink received (more than the deliveries when some were repeated
    /// or failed).
    pub requests: u64,
    /// Requests carrying another run's event id (must be 0: runs share no topic).
    pub foreign: u64,
    /// Publish (or the start, for a backlog published before) to 2xx.
    pub latency: Percentiles,
    /// Retries' arrival less their due time (`/flaky` only).
    pub lateness: Percentiles,
    /// hookline's own counts (`/metrics`), for hookline's runs.
    pub hookline: Option<Deliveries>,
}

/// `webhook_delivery_total` by status, read from hookline's admin port before SIGTERM.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Deliveries {
    /// Delivered.
    pub succeeded: u64,
    /// Sent to a retry tier (failed, or deferred because the endpoint's queue was full).
    pub retry_scheduled: u64,
    /// Parked in the DLQ.
    pub dlq: u64,
    /// Deliveries the fan-out stage wrote (`webhook_fanout_deliveries_total`).
    pub fanned_out: u64,
}

/// The broker with its CPU time now, if it can be read.
fn broker_now(broker: Option<Broker>) -> Option<(Broker, f64)> {
    broker.and_then(|broker| Some((broker, broker.cpu_s()?)))
}

/// A started contestant whose deliveries the sink counts.
pub struct Launched {
    contestant: Contestant,
    started: Instant,
    deliveries: u64,
    admin_port: Option<u16>,
    log: PathBuf,
    /// CPU time spent before [`Launched::restart`], left out of the figures.
    cpu_before_s: f64,
    /// Its CPU time when the sink had the first delivery (since the start or the restart).
    cpu_at_first_s: Option<f64>,
    /// The broker and its CPU time at the start (or the restart).
    broker: Option<(Broker, f64)>,
}

/// Resets the sink for `deliveries` deliveries of ids starting with `prefix`, then starts
/// `command` (its log `<run>.log`); `admin_port` is hookline's, to read its counts from.
pub fn launch(
    ctx: &Ctx<'_>,
    run: &str,
    command: Command,
    deliveries: u64,
    prefix: &str,
    admin_port: Option<u16>,
) -> anyhow::Result<Launched> {
    let log = ctx.workdir.join(format!("{run}.log"));
    ctx.sink.reset(deliveries, prefix);
    let broker = broker_now(ctx.broker);
    let started = Instant::now();
    let contestant = Contestant::spawn(command, &log)?;
    Ok(Launched {
        contestant,
        started,
        deliveries,
        admin_port,
        log,
        cpu_before_s: 0.0,
        cpu_at_first_s: None,
        broker,
    })
}

impl Launched {
    /// Waits until the sink has `count` deliveries, failing if the process exits first or
    /// `timeout` passes.
    pub async fn wait_for(
        &mut self,
        sink: &Sink,
        count: u64,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        if self.cpu_at_first_s.is_none() && count > 0 {
            self.wait_distinct(sink, 1, count, timeout).await?;
            self.cpu_at_first_s = Some(self.contestant.sample()?.cpu_s);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        self.wait_distinct(sink, count, count, left).await
    }

    /// Waits until the sink has `count` of the `of` deliveries waited for.
    async fn wait_distinct(
        &mut self,
        sink: &Sink,
        count: u64,
        of: u64,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        tokio::select! {
            all = sink.wait_distinct(count, timeout) => if !all {
                bail!(
                    "only {} of {of} deliveries arrived within the run's timeout\n{}",
                    sink.seen().distinct,
                    self.contestant.log_tail()
                );
            },
            exit = self.contestant.exited() => bail!(
                "it exited ({}) before making every delivery\n{}",
                exit.map_or_else(|error| error.to_string(), |status| status.to_string()),
                self.contestant.log_tail()
            ),
        }
        Ok(())
    }

    /// Starts the measurement again from now (after a warm-up): the sink reset for
    /// `deliveries` of `prefix`, the clock and the CPU time counted from here.
    pub fn restart(&mut self, sink: &Sink, deliveries: u64, prefix: &str) -> anyhow::Result<()> {
        self.cpu_before_s = self.contestant.sample()?.cpu_s;
        self.cpu_at_first_s = None;
        self.broker = broker_now(self.broker.map(|(broker, _)| broker));
        sink.reset(deliveries, prefix);
        self.started = Instant::now();
        self.deliveries = deliveries;
        Ok(())
    }

    /// Waits until the sink has every delivery.
    pub async fn wait_all(&mut self, sink: &Sink, timeout: Duration) -> anyhow::Result<()> {
        self.wait_for(sink, self.deliveries, timeout).await
    }

    /// Its CPU time and peak RSS now.
    pub fn sample(&self) -> anyhow::Result<Sample> {
        self.contestant.sample()
    }

    /// Samples it, reads its counts, stops it and computes the run's figures.
    pub async fn finish(self, sink: &Sink) -> anyhow::Result<Measured> {
        let sample = self.contestant.sample()?;
        let cpu_s = sample.cpu_s - self.cpu_before_s;
        let broker_cpu_s = self
            .broker
            .and_then(|(broker, before)| Some(broker.cpu_s()? - before));
        let hookline = match self.admin_port {
            Some(port) => deliveries(port).await,
            None => None,
        };
        let status = self.contestant.terminate(STOP_GRACE).await?;
        if !status.success() {
            bail!(
                "it exited with {status} after SIGTERM\n{}",
                crate::process::log_tail(&self.log)
            );
        }
        let seen = sink.seen();
        if seen.foreign > 0 {
            bail!(
                "{} requests carried another run's event ids: runs must not share topics",
                seen.foreign
            );
        }
        let since_start =
            |at: Option<Instant>| at.map_or(f64::NAN, |at| (at - self.started).as_secs_f64());
        let wall_s = since_start(seen.all_at);
        let deliveries = self.deliveries;
        Ok(Measured {
            deliveries,
            wall_s,
            deliveries_per_s: deliveries as f64 / wall_s,
            first_delivery_s: since_start(seen.first_at),
            after_first_per_s: match (seen.first_at, seen.all_at) {
                (Some(first), Some(all)) if all > first => {
                    deliveries.saturating_sub(1) as f64 / (all - first).as_secs_f64()
                }
                _ => f64::NAN,
            },
            peak_rss_mib: sample.peak_rss_kib as f64 / 1024.0,
            cpu_s,
            cpu_ms_per_1k_deliveries: cpu_s * 1000.0 / (deliveries as f64 / 1000.0),
            cpu_ms_per_1k_after_first: match self.cpu_at_first_s {
                Some(at_first) if deliveries > 1 => {
                    (sample.cpu_s - at_first) * 1000.0 / ((deliveries - 1) as f64 / 1000.0)
                }
                _ => f64::NAN,
            },
            broker_cpu_s,
            broker_cpu_ms_per_1k_deliveries: broker_cpu_s
                .map(|s| s * 1000.0 / (deliveries as f64 / 1000.0)),
            requests: seen.requests,
            foreign: seen.foreign,
            latency: sink.latency(),
            lateness: sink.lateness(),
            hookline,
        })
    }
}

/// Launches, waits for every delivery and finishes: a backlog drained.
pub async fn drain(
    ctx: &Ctx<'_>,
    run: &str,
    command: Command,
    deliveries: u64,
    prefix: &str,
    admin_port: Option<u16>,
) -> anyhow::Result<Measured> {
    let mut launched = launch(ctx, run, command, deliveries, prefix, admin_port)?;
    launched.wait_all(ctx.sink, ctx.run_timeout).await?;
    launched.finish(ctx.sink).await
}

/// `webhook_delivery_total` by status and `webhook_fanout_deliveries_total`, from
/// hookline's admin port.
async fn deliveries(admin_port: u16) -> Option<Deliveries> {
    let text = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .ok()?
        .get(format!("http://127.0.0.1:{admin_port}/metrics"))
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
pub fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr().context("finding a free port")?.port())
}

/// A progress line on stderr.
pub fn note(message: &str) {
    eprintln!("hookline-bench: {message}");
}
