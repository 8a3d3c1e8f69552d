//! `hookline-bench`: measures `hookline dispatch` against the simplest at-least-once
//! Kafka-to-HTTP forwarder on the same backlog, in the same run, and reports the ratios.
//!
//! Both contestants run as their own processes, so that each one's memory and CPU are its
//! own; the benchmark process holds the fixture and the HTTP sink they deliver to.

mod baseline;
mod broker;
mod chart;
mod contest;
mod fixture;
mod history;
mod index;
mod machine;
mod process;
mod report;
mod results;
mod run;
mod scenarios;
mod sink;
mod sizes;
mod stats;
mod text_table;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

/// Counts live heap bytes for `hookline-bench index`; otherwise `System` plus one relaxed
/// load per call.
#[global_allocator]
static ALLOC: index::CountingAlloc = index::CountingAlloc;

/// Throughput, peak memory and CPU of `hookline dispatch`, as ratios against a minimal
/// Kafka-to-HTTP forwarder measured in the same run.
#[derive(Debug, Parser)]
#[command(
    name = "hookline-bench",
    version,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(flatten)]
    bench: BenchArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The baseline forwarder, started by the benchmark itself.
    #[command(hide = true)]
    Baseline(baseline::BaselineArgs),
    /// The nine scenarios in one run (`deploy/bench all`): a table, `results.json` and an
    /// SVG chart in `--out-dir`.
    All(scenarios::AllArgs),
    /// The ceiling's client, started by the benchmark itself.
    #[command(hide = true)]
    Ceiling(scenarios::CeilingArgs),
    /// Heap bytes and lookup time of the subscription index against a plain table of the
    /// same subscriptions (no Kafka).
    Index(index::IndexArgs),
    /// How long `hookline events show` takes to find one event among many attempt records.
    History(history::HistoryArgs),
}

/// Options of a benchmark run.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The `hookline` binary to measure (a release build).
    #[arg(long, default_value = "target/release/hookline")]
    pub hookline: PathBuf,
    /// Events in the backlog each contestant delivers.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub events: u64,
    /// Runs of each contestant, alternating (baseline, hookline, no-log, fanout, baseline, ...).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub rounds: u32,
    /// Deliveries in flight at once: hookline's per-endpoint concurrency and the
    /// baseline's bound.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub concurrency: u32,
    /// Tenant events in the fan-out backlog, each delivered to every one of
    /// `--fanout-endpoints` endpoints of one tenant; 0 skips the fan-out scenario.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub fanout_events: u64,
    /// Endpoints of the fan-out's tenant, each subscribed to every event type.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub fanout_endpoints: u64,
    /// Leave out the run of hookline with its attempt log off (`[attempts] enabled =
    /// false`), which measures what the attempt log costs.
    #[arg(long)]
    pub skip_attempt_log_cost: bool,
    /// Size of each event's JSON payload, in bytes (about).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(16..=65_536))]
    pub payload_bytes: u64,
    /// Give up on one run (and fail) after this many seconds.
    #[arg(long, default_value_t = 60)]
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
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Leave the benchmark's topics and consumer groups on the broker.
    #[arg(long)]
    pub keep_topics: bool,
    /// A free-form line about the stack and the revision, printed with the machine
    /// (`deploy/bench` passes the Kafka and registry versions and the git revision).
    #[arg(long, default_value = "")]
    pub label: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result = match cli.command {
        // Outside the async runtime: nothing else allocates while the heap is measured.
        Some(Command::Index(args)) => index::run(args),
        Some(Command::Baseline(args)) => block_on(baseline::run(args)),
        Some(Command::History(args)) => block_on(history::run(args)),
        Some(Command::All(args)) => block_on(scenarios::run(args)),
        Some(Command::Ceiling(args)) => block_on(scenarios::run_ceiling(args)),
        None => block_on(run::run(cli.bench)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `future` to completion on a new multi-threaded runtime.
fn block_on(future: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(future)
}
