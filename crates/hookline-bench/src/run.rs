//! `deploy/bench` without a scenario: `rounds` rounds of the baseline, hookline, hookline
//! without its attempt log and (unless skipped) the fan-out, then the report. Every run has
//! topics of its own (see [`run_names`]), its backlog published before it starts.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use hookline_kafka::KafkaSettings;
use tokio::process::Command;

use crate::BenchArgs;
use crate::broker::Broker;
use crate::contest::{self, Ctx, Measured, hookline_overrides, note};
use crate::fixture::{self, FanoutFixture, Fixture};
use crate::machine::{Machine, Versions};
use crate::report::{Kind, Report, RunResult, Workload};
use crate::sink::Sink;

/// A pause between runs, so that one run's shutdown does not weigh on the next.
const SETTLE: Duration = Duration::from_secs(1);
/// Most deliveries in one fan-out run.
const MAX_FANOUT_DELIVERIES: u64 = 10_000_000;

/// Runs the benchmark and prints the report.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let hookline = std::path::absolute(&args.hookline).context("the hookline path")?;
    let versions = Versions::detect(&hookline, &args.label)?;
    let machine = Machine::detect();
    if args.fanout_events.saturating_mul(args.fanout_endpoints) > MAX_FANOUT_DELIVERIES {
        bail!(
            "--fanout-events times --fanout-endpoints must be at most {MAX_FANOUT_DELIVERIES} \
             (the sink keeps every delivery's key)"
        );
    }
    let sink = Sink::start().await?;
    let workdir = tempfile::Builder::new()
        .prefix("hookline-bench-")
        .tempdir()
        .context("creating a work directory")?;
    let ctx = Ctx {
        kafka: KafkaSettings::new(&args.bootstrap_servers),
        bootstrap: args.bootstrap_servers.clone(),
        registry: args.registry_url.clone(),
        sink: &sink,
        hookline,
        workdir: workdir.path(),
        run_timeout: Duration::from_secs(args.run_timeout_s),
        base: hookline_testkit::unique_name("bench"),
        broker: Broker::find(&args.bootstrap_servers),
    };
    let measured = rounds(&args, &ctx).await;
    if measured.is_err() {
        // The logs are the only account of what went wrong: leave them.
        note(&format!(
            "contestant logs kept in {}",
            workdir.keep().display()
        ));
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
            fanout_events: args.fanout_events,
            fanout_endpoints: if args.fanout_events == 0 {
                0
            } else {
                args.fanout_endpoints
            },
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

/// The contestants of each round, in order.
fn kinds(args: &BenchArgs) -> Vec<Kind> {
    let mut kinds = vec![Kind::Baseline, Kind::Hookline];
    if !args.skip_attempt_log_cost {
        kinds.push(Kind::NoAttemptLog);
    }
    if args.fanout_events > 0 {
        kinds.push(Kind::Fanout);
    }
    kinds
}

/// The name of each run's topics, round by round: one for every round and contestant, so
/// that no run reads what another wrote (a retry tier included).
pub fn run_names(base: &str, rounds: u32, kinds: &[Kind]) -> Vec<(u32, Kind, String)> {
    (1..=rounds)
        .flat_map(|round| {
            kinds
                .iter()
                .map(move |kind| (round, *kind, fixture::run_name(base, kind.name(), round)))
        })
        .collect()
}

async fn rounds(args: &BenchArgs, ctx: &Ctx<'_>) -> anyhow::Result<Vec<RunResult>> {
    let payload_bytes = usize::try_from(args.payload_bytes).context("--payload-bytes")?;
    let mut runs = Vec::new();
    for (round, kind, name) in run_names(&ctx.base, args.rounds, &kinds(args)) {
        let started = Instant::now();
        let (created, result) = match kind {
            Kind::Fanout => {
                let fanout = FanoutFixture::create(
                    &ctx.kafka,
                    &name,
                    &ctx.sink.url(),
                    args.fanout_events,
                    args.fanout_endpoints,
                    payload_bytes,
                )
                .await
                .context("setting up the fan-out fixture")?;
                note(&format!(
                    "{} #{round}: backlog ready in {:.1} s",
                    kind.name(),
                    started.elapsed().as_secs_f64()
                ));
                let result = run_fanout(args, ctx, &fanout, round).await;
                (fanout.created, result)
            }
            Kind::Baseline | Kind::Hookline | Kind::NoAttemptLog => {
                let fixture = Fixture::direct(
                    &ctx.kafka,
                    &name,
                    &ctx.sink.url(),
                    args.events,
                    payload_bytes,
                )
                .await
                .context("setting up the fixture")?;
                note(&format!(
                    "{} #{round}: backlog ready in {:.1} s",
                    kind.name(),
                    started.elapsed().as_secs_f64()
                ));
                let result = run_direct(args, ctx, &fixture, kind, round).await;
                (fixture.created, result)
            }
        };
        let group = format!("{name}-{}", kind.name());
        if !args.keep_topics
            && let Err(error) = fixture::remove(
                &ctx.kafka,
                &created,
                &[group.clone(), format!("{group}.fanout")],
            )
            .await
        {
            note(&format!("could not remove the fixture: {error:#}"));
        }
        let result = result.with_context(|| format!("{} run {round}", kind.name()))?;
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
    Ok(runs)
}

async fn run_direct(
    args: &BenchArgs,
    ctx: &Ctx<'_>,
    fixture: &Fixture,
    kind: Kind,
    round: u32,
) -> anyhow::Result<RunResult> {
    let run = format!("{}-{round}", kind.name());
    let (command, admin) = match kind {
        Kind::Baseline => (
            baseline_command(
                ctx,
                &fixture.topics.events,
                &format!("{}-{}", fixture.name, kind.name()),
                args.concurrency,
            )?,
            None,
        ),
        _ => {
            let mut config = ctx.hookline_config(kind.name(), &fixture.topics, &fixture.tiers)?;
            config.per_endpoint = args.concurrency;
            config.attempts = kind != Kind::NoAttemptLog;
            (
                ctx.hookline_command(&run, &config)?,
                Some(config.admin_port),
            )
        }
    };
    let measured =
        contest::drain(ctx, &run, command, args.events, &fixture.id_prefix(), admin).await?;
    Ok(run_result(kind, round, args.events, &measured))
}

async fn run_fanout(
    args: &BenchArgs,
    ctx: &Ctx<'_>,
    fanout: &FanoutFixture,
    round: u32,
) -> anyhow::Result<RunResult> {
    let run = format!("fanout-{round}");
    let mut config = ctx.hookline_config(
        Kind::Fanout.name(),
        &fanout.topics,
        &[fixture::RETRY_TIER.to_owned()],
    )?;
    config.per_endpoint = args.concurrency;
    config.fanout_topic = Some(fanout.fanout_topic.clone());
    let command = ctx.hookline_command(&run, &config)?;
    let measured = contest::drain(
        ctx,
        &run,
        command,
        fanout.deliveries(),
        &fanout.id_prefix(),
        Some(config.admin_port),
    )
    .await?;
    Ok(run_result(Kind::Fanout, round, fanout.events, &measured))
}

/// `hookline-bench baseline` on `topic`.
pub fn baseline_command(
    ctx: &Ctx<'_>,
    topic: &str,
    group: &str,
    concurrency: u32,
) -> anyhow::Result<Command> {
    let mut command = Command::new(std::env::current_exe().context("this benchmark's own path")?);
    command
        .arg("baseline")
        .args(["--bootstrap-servers", &ctx.bootstrap])
        .args(["--topic", topic])
        .args(["--group-id", group])
        .args(["--url", &ctx.sink.url()])
        .args(["--concurrency", &concurrency.to_string()]);
    Ok(command)
}

fn run_result(kind: Kind, round: u32, events: u64, m: &Measured) -> RunResult {
    let per_event = events as f64 / m.deliveries as f64;
    RunResult {
        contestant: kind,
        round,
        events,
        deliveries: m.deliveries,
        wall_s: m.wall_s,
        events_per_s: events as f64 / m.wall_s,
        deliveries_per_s: m.deliveries_per_s,
        first_delivery_s: m.first_delivery_s,
        after_first_events_per_s: m.after_first_per_s * per_event,
        peak_rss_mib: m.peak_rss_mib,
        cpu_s: m.cpu_s,
        cpu_ms_per_1k_events: m.cpu_s * 1000.0 / (events as f64 / 1000.0),
        cpu_ms_per_1k_deliveries: m.cpu_ms_per_1k_deliveries,
        broker_cpu_s: m.broker_cpu_s,
        requests: m.requests,
        hookline_deliveries: m.hookline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::tests::{assert_disjoint, topics_of};

    #[test]
    fn every_round_and_contestant_has_topics_of_its_own() {
        let kinds = [
            Kind::Baseline,
            Kind::Hookline,
            Kind::NoAttemptLog,
            Kind::Fanout,
        ];
        let names: Vec<String> = run_names("t-bench-x", 3, &kinds)
            .into_iter()
            .map(|(_, _, name)| name)
            .collect();
        assert_eq!(names.len(), 12);
        assert_disjoint(&topics_of(&names, &[fixture::RETRY_TIER]));
    }
}
