//! `hookline-bench all`: the ten scenarios in one run, each on topics of its own, each
//! against its baseline measured in the same run; a table, `results.json` and an SVG chart.
//!
//! 1 ceiling, 2 forwarder, 3 pipeline, then 6 isolation and 4 many endpoints (both compared
//! with the pipeline) alternate over the rounds; the others run once: 5 slow (per in-flight
//! limit), 7 retry timing, 8 fan-out, 9 latency under load, 10 neighbours (a healthy
//! endpoint beside misbehaving ones, against it alone).

mod ceiling;
mod direct;
mod fanout;
mod isolation;
mod latency;
mod many;
mod neighbours;
mod retry_timing;
mod slow;

use std::ops::Deref;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hookline_kafka::KafkaSettings;

pub use ceiling::{CeilingArgs, run as run_ceiling};

use crate::broker::Broker;
use crate::contest::{Ctx, Measured, hookline_overrides, note};
use crate::machine::{Machine, Versions};
use crate::results::{Results, ScenarioResult};
use crate::sink::{Misbehaviour, Sink};
use crate::sizes::Sizes;

/// Options of `hookline-bench all`.
#[derive(Debug, clap::Args)]
pub struct AllArgs {
    /// The `hookline` binary to measure (a release build).
    #[arg(long, default_value = "target/release/hookline")]
    pub hookline: PathBuf,
    /// Tiny sizes, a few seconds per scenario: checks that the harness works (CI); its
    /// figures judge nothing.
    #[arg(long)]
    pub quick: bool,
    /// Rounds of the ceiling, forwarder, pipeline, isolation and many (default 3, 1 with
    /// `--quick`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub rounds: Option<u32>,
    /// Run only these scenarios (comma-separated: ceiling, forwarder, pipeline, many,
    /// slow, isolation, retry, fanout, latency, neighbours); the ratios need the first three.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Rounds of the neighbours sweep, each the healthy endpoint alone and every point
    /// (default 3, 1 with `--quick`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub neighbours_rounds: Option<u32>,
    /// Run only these points of the neighbours sweep, as `<kind>-<count>` (comma-separated,
    /// e.g. `slow-20,hang-1000`; kinds slow, hang, fail, throttle); the healthy endpoint
    /// alone always runs first.
    #[arg(long, value_delimiter = ',', value_parser = parse_point)]
    pub neighbours: Vec<(Misbehaviour, u64)>,
    /// Where `results.json`, `results.txt` and `results.svg` go.
    #[arg(long, default_value = "target/bench")]
    pub out_dir: PathBuf,
    /// Give up on one run (and fail) after this many seconds.
    #[arg(long, default_value_t = 300)]
    pub run_timeout_s: u64,
    /// Kafka brokers.
    #[arg(
        long,
        env = "HOOKLINE_BOOTSTRAP_SERVERS",
        default_value = "127.0.0.1:9092"
    )]
    pub bootstrap_servers: String,
    /// The schema registry's Confluent-compatible API (hookline needs it for its DLQ).
    #[arg(
        long,
        env = "HOOKLINE_REGISTRY_URL",
        default_value = "http://127.0.0.1:8081/apis/ccompat/v7"
    )]
    pub registry_url: String,
    /// Leave the benchmark's topics and consumer groups on the broker.
    #[arg(long)]
    pub keep_topics: bool,
    /// A free-form line about the stack and the revision, printed with the machine.
    #[arg(long, default_value = "")]
    pub label: String,
}

/// A run's context and the sizes.
pub struct ScenarioCtx<'a> {
    ctx: Ctx<'a>,
    /// The sizes.
    pub sizes: Sizes,
    keep_topics: bool,
}

impl<'a> Deref for ScenarioCtx<'a> {
    type Target = Ctx<'a>;
    fn deref(&self) -> &Ctx<'a> {
        &self.ctx
    }
}

impl ScenarioCtx<'_> {
    /// Removes a run's topics and consumer groups (the fan-out stage's too), unless
    /// `--keep-topics`.
    pub async fn cleanup(&self, topics: &[String], groups: &[String]) {
        if self.keep_topics {
            return;
        }
        let groups: Vec<String> = groups
            .iter()
            .flat_map(|group| [group.clone(), format!("{group}.fanout")])
            .collect();
        if let Err(error) = crate::fixture::remove(&self.kafka, topics, &groups).await {
            note(&format!("could not remove a run's topics: {error:#}"));
        }
    }
}

/// Runs the scenarios, prints the table, writes the files.
pub async fn run(args: AllArgs) -> anyhow::Result<()> {
    let hookline = std::path::absolute(&args.hookline).context("the hookline path")?;
    let versions = Versions::detect(&hookline, &args.label)?;
    let machine = Machine::detect();
    let sink = Sink::start().await?;
    let workdir = tempfile::Builder::new()
        .prefix("hookline-bench-all-")
        .tempdir()
        .context("creating a work directory")?;
    let ctx = ScenarioCtx {
        ctx: Ctx {
            kafka: KafkaSettings::new(&args.bootstrap_servers),
            bootstrap: args.bootstrap_servers.clone(),
            registry: args.registry_url.clone(),
            sink: &sink,
            hookline,
            workdir: workdir.path(),
            run_timeout: Duration::from_secs(args.run_timeout_s),
            base: hookline_testkit::unique_name("bench"),
            broker: Broker::find(&args.bootstrap_servers),
        },
        sizes: Sizes::new(args.quick, args.rounds, args.neighbours_rounds)
            .with_points(&args.neighbours),
        keep_topics: args.keep_topics,
    };
    let started = Instant::now();
    let scenarios = all(&ctx, &args.only).await;
    let scenarios = match scenarios {
        Ok(scenarios) => scenarios,
        Err(error) => {
            note(&format!(
                "contestant logs kept in {}",
                workdir.keep().display()
            ));
            return Err(error);
        }
    };
    note(&format!(
        "all scenarios in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    let results = Results::new(
        machine,
        versions,
        ctx.sizes.clone(),
        hookline_overrides(),
        scenarios,
    );
    let table = results.table();
    print!("{table}");
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    let write = |name: &str, text: &str| {
        let path = args.out_dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        note(&format!("wrote {}", path.display()));
        anyhow::Ok(())
    };
    write("results.json", &serde_json::to_string_pretty(&results)?)?;
    write("results.txt", &table)?;
    write("results.svg", &crate::chart::svg(&results)?)?;
    Ok(())
}

/// Whether scenario `name` is to run.
fn wanted(only: &[String], name: &str) -> bool {
    only.is_empty() || only.iter().any(|one| one == name)
}

async fn all(ctx: &ScenarioCtx<'_>, only: &[String]) -> anyhow::Result<Vec<ScenarioResult>> {
    let mut ceiling: Vec<Measured> = Vec::new();
    let mut forwarder: Vec<Measured> = Vec::new();
    let mut pipeline: Vec<Measured> = Vec::new();
    let mut isolated = Vec::new();
    let mut many_runs: Vec<Measured> = Vec::new();
    for round in 1..=ctx.sizes.rounds {
        if wanted(only, "ceiling") {
            ceiling.push(logged(
                "ceiling",
                round,
                ceiling::measure(ctx, round).await,
            )?);
        }
        if wanted(only, "forwarder") {
            forwarder.push(logged(
                "forwarder",
                round,
                direct::forwarder(ctx, round).await,
            )?);
        }
        if wanted(only, "pipeline") {
            pipeline.push(logged(
                "pipeline",
                round,
                direct::pipeline(ctx, round).await,
            )?);
        }
        if wanted(only, "isolation") {
            isolated.push(logged(
                "isolation",
                round,
                isolation::measure(ctx, round).await,
            )?);
        }
        if wanted(only, "many") {
            many_runs.push(logged("many", round, many::measure(ctx, round).await)?);
        }
    }
    let mut scenarios = Vec::new();
    let described = |name: &str, what: String, runs: Vec<Measured>| {
        (!runs.is_empty()).then(|| ScenarioResult::of(name, what, runs))
    };
    let c = ctx.sizes.concurrency;
    let n = ctx.sizes.events;
    scenarios.extend(described(
        "ceiling",
        format!("reqwest, {n} POSTs, {c} in flight, no Kafka"),
        ceiling,
    ));
    scenarios.extend(described(
        "forwarder",
        format!("minimal at-least-once forwarder, {n} events, {c} in flight"),
        forwarder,
    ));
    scenarios.extend(described(
        "pipeline",
        format!("hookline, 1 endpoint, {n} events, per_endpoint {c}"),
        pipeline,
    ));
    scenarios.extend(many::result(&ctx.sizes, many_runs));
    if wanted(only, "slow") {
        for &limit in &ctx.sizes.slow_limits {
            scenarios.push(logged("slow", limit, slow::run(ctx, limit).await)?);
        }
    }
    scenarios.extend(isolation::result(&ctx.sizes, isolated));
    if wanted(only, "retry") {
        scenarios.push(logged("retry", 1, retry_timing::run(ctx).await)?);
    }
    if wanted(only, "fanout") {
        scenarios.push(logged("fanout", 1, fanout::run(ctx).await)?);
    }
    if wanted(only, "latency") {
        scenarios.push(logged("latency", 1, latency::run(ctx).await)?);
    }
    if wanted(only, "neighbours") {
        scenarios.extend(neighbours::sweep(ctx).await?);
    }
    Ok(scenarios)
}

/// A point of the neighbours sweep: `<kind>-<count>`.
fn parse_point(text: &str) -> Result<(Misbehaviour, u64), String> {
    let (kind, count) = text
        .rsplit_once('-')
        .ok_or_else(|| format!("{text:?}: expected <kind>-<count>, e.g. slow-20"))?;
    let kind = Misbehaviour::ALL
        .into_iter()
        .find(|k| k.name() == kind)
        .ok_or_else(|| format!("{kind:?}: expected slow, hang, fail or throttle"))?;
    let count = count
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{count:?}: expected a count of endpoints, at least 1"))?;
    Ok((kind, count))
}

/// `result` with its scenario named, after a progress line.
fn logged<T: Progress>(scenario: &str, round: u32, result: anyhow::Result<T>) -> anyhow::Result<T> {
    let result = result.with_context(|| format!("scenario {scenario} ({round})"))?;
    note(&format!("{scenario} ({round}): {}", result.progress()));
    Ok(result)
}

/// One line about a finished run.
trait Progress {
    fn progress(&self) -> String;
}

impl Progress for Measured {
    fn progress(&self) -> String {
        format!(
            "{:.0} deliveries/s, p99 {:.1} ms, {:.1} MiB peak RSS",
            self.deliveries_per_s, self.latency.p99_ms, self.peak_rss_mib
        )
    }
}

impl Progress for ScenarioResult {
    fn progress(&self) -> String {
        format!(
            "{:.0} deliveries/s, p99 {:.1} ms, {:.1} MiB peak RSS",
            self.deliveries_per_s, self.latency.p99_ms, self.peak_rss_mib
        )
    }
}
