//! `hookline-chaos`: runs `hookline dispatch` replicas against the real local stack through
//! faults (kill -9, rolling restarts, scaling, a broker restart, a registry outage, failing
//! endpoints, poison records) and reports, per scenario, what was delivered, parked, lost and
//! duplicated, with the stalls and the retry lateness. Exits non-zero when a scenario fails.

mod analysis;
mod clock;
mod dlq;
mod fixture;
mod gate;
mod http;
mod load;
mod proxy;
mod receiver;
mod replicas;
mod report;
mod scenarios;
mod signature;
mod timeline;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use hookline_kafka::KafkaSettings;

use crate::report::{ScenarioReport, SuiteReport};
use crate::scenarios::Env;
use hookline_testkit::Machine;

/// The fault-run suite of hookline's dispatcher.
#[derive(Debug, Parser)]
#[command(name = "hookline-chaos", version)]
struct Cli {
    /// The CI version: thousands of events and short outages instead of 100,000 events.
    #[arg(long)]
    short: bool,
    /// Run only these scenarios (comma-separated names; see --list).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
    /// The `hookline` binary whose `dispatch` is run.
    #[arg(long, default_value = "target/debug/hookline")]
    hookline: PathBuf,
    /// The local stack's script (the broker restart uses it, with this environment).
    #[arg(long, default_value = "deploy/local/stack")]
    stack: PathBuf,
    /// Kafka brokers.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap_servers: String,
    /// The registry's Confluent-compatible API.
    #[arg(long, default_value = "http://127.0.0.1:8081/apis/ccompat/v7")]
    registry_url: String,
    /// Where results.json, raw records and dispatcher logs go.
    #[arg(long, default_value = "target/chaos")]
    out: PathBuf,
    /// Leave each scenario's topics and consumer group on the broker.
    #[arg(long)]
    keep_topics: bool,
    /// An extra librdkafka property for every dispatcher (`KEY=VALUE`, repeatable), e.g.
    /// `group.remote.assignor=range`; named in the report.
    #[arg(long = "dispatcher-property", value_name = "KEY=VALUE", value_parser = key_value)]
    dispatcher_properties: Vec<(String, String)>,
    /// A free-form line about the stack and the revision, kept in the report.
    #[arg(long, default_value = "")]
    label: String,
}

type ScenarioRun =
    for<'a> fn(&'a Env) -> Pin<Box<dyn Future<Output = anyhow::Result<ScenarioReport>> + 'a>>;

/// Every scenario, in the order they run.
fn scenarios() -> Vec<(&'static str, ScenarioRun)> {
    use scenarios::{broker, endpoints, kill, poison, registry, rolling, scale};
    vec![
        (kill::NAME, |env| Box::pin(kill::run(env))),
        (rolling::NAME, |env| Box::pin(rolling::run(env))),
        (scale::NAME, |env| Box::pin(scale::run(env))),
        (broker::NAME, |env| Box::pin(broker::run(env))),
        (registry::NAME, |env| Box::pin(registry::run(env))),
        (endpoints::NAME, |env| Box::pin(endpoints::run(env))),
        (poison::NAME, |env| Box::pin(poison::run(env))),
    ]
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("warn,librdkafka=off,rdkafka=off")
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    if cli.list {
        for (name, _) in scenarios() {
            println!("{name}");
        }
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: starting the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the chosen scenarios; returns whether all passed.
async fn run(cli: Cli) -> anyhow::Result<bool> {
    let known: Vec<&str> = scenarios().iter().map(|(name, _)| *name).collect();
    if let Some(unknown) = cli.only.iter().find(|name| !known.contains(&name.as_str())) {
        anyhow::bail!("no scenario {unknown:?}; there are {}", known.join(", "));
    }
    let env = Env {
        hookline: std::path::absolute(&cli.hookline).context("the hookline path")?,
        stack: std::path::absolute(&cli.stack).context("the stack script's path")?,
        kafka: KafkaSettings::new(&cli.bootstrap_servers),
        registry_url: cli.registry_url.clone(),
        short: cli.short,
        out: cli.out.clone(),
        keep_topics: cli.keep_topics,
        dispatcher_properties: cli.dispatcher_properties.clone(),
    };
    std::fs::create_dir_all(&env.out).with_context(|| format!("creating {}", env.out.display()))?;
    let results = env.out.join("results.json");
    let mut suite = SuiteReport {
        started_at: jiff::Timestamp::now()
            .round(jiff::Unit::Second)?
            .to_string(),
        mode: if cli.short { "short" } else { "full" }.to_owned(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine: Machine::detect(),
        versions: versions(&env, &cli.label),
        scenarios: Vec::new(),
        passed: true,
    };
    for (name, scenario) in scenarios() {
        if !cli.only.is_empty() && !cli.only.iter().any(|only| only == name) {
            continue;
        }
        eprintln!("chaos: ---- {name} ----");
        let report = match scenario(&env).await {
            Ok(report) => report,
            Err(error) => ScenarioReport::errored(name, "", &error),
        };
        eprintln!(
            "chaos: {name}: {}",
            if report.passed() {
                "PASS".to_owned()
            } else {
                format!("FAIL: {}", report.failures.join("; "))
            }
        );
        suite.passed &= report.passed();
        suite.scenarios.push(report);
        // Written after each scenario, so that a run cut short keeps what it measured.
        std::fs::write(&results, serde_json::to_string_pretty(&suite)?)
            .with_context(|| format!("writing {}", results.display()))?;
    }
    println!(
        "hookline chaos suite ({} run, {}; {} CPUs, {:.1} GiB, {})",
        suite.mode,
        suite.started_at,
        suite.machine.nproc,
        suite.machine.memory_gib,
        suite.machine.cpu
    );
    print!("{}", suite.table());
    println!("results: {}", results.display());
    Ok(suite.passed)
}

fn key_value(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(key, value)| (key.trim().to_owned(), value.trim().to_owned()))
        .filter(|(key, _)| !key.is_empty())
        .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))
}

fn versions(env: &Env, label: &str) -> BTreeMap<String, String> {
    let mut versions = BTreeMap::new();
    let hookline = std::process::Command::new(&env.hookline)
        .arg("--version")
        .output();
    if let Ok(output) = hookline {
        versions.insert(
            "hookline".to_owned(),
            String::from_utf8_lossy(&output.stdout).trim().to_owned(),
        );
    }
    versions.insert(
        "librdkafka".to_owned(),
        rdkafka::util::get_rdkafka_version().1,
    );
    versions.insert("chaos".to_owned(), env!("CARGO_PKG_VERSION").to_owned());
    for (key, value) in &env.dispatcher_properties {
        versions.insert(format!("dispatcher property {key}"), value.clone());
    }
    if !label.is_empty() {
        versions.insert("label".to_owned(), label.to_owned());
    }
    versions
}
