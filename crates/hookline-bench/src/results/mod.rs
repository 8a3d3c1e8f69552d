//! The results of `hookline-bench all`: each scenario's medians and its ratio against its
//! baseline in the same run, the `ratios` the issue names, and whether each target is met
//! (printed, never asserted).

mod table;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::contest::Measured;
use crate::machine::{Machine, Versions};
use crate::report::Spread;
use crate::sizes::Sizes;
use crate::stats::Percentiles;

/// One scenario over its rounds.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioResult {
    /// Its name (`slow-<limit>` per in-flight limit).
    pub scenario: String,
    /// What it ran.
    pub what: String,
    /// Deliveries per round.
    pub deliveries: u64,
    /// Deliveries per second, the median over the rounds.
    pub deliveries_per_s: f64,
    /// Publish (or, for a backlog, the contestant's start) to 2xx: medians over the rounds.
    pub latency: Percentiles,
    /// Retries' lateness against their due time (retry timing only).
    pub lateness: Option<Percentiles>,
    /// CPU ms per 1000 deliveries, the median.
    pub cpu_ms_per_1k_deliveries: f64,
    /// Deliveries per second after the first, the median ([`Measured::after_first_per_s`]).
    pub after_first_per_s: f64,
    /// CPU ms per 1000 deliveries from the first delivery on, the median
    /// ([`Measured::cpu_ms_per_1k_after_first`]).
    pub cpu_ms_per_1k_after_first: f64,
    /// Peak RSS, MiB, the median.
    pub peak_rss_mib: f64,
    /// The broker's CPU ms per 1000 deliveries over the runs' spans, the median, when the
    /// broker runs on this machine.
    pub broker_cpu_ms_per_1k_deliveries: Option<f64>,
    /// The scenario it is compared with.
    pub against: Option<String>,
    /// Its deliveries/s over the baseline's.
    pub throughput_ratio: Option<f64>,
    /// Its CPU per delivery over the baseline's.
    pub cpu_ratio: Option<f64>,
    /// Round against round: the median of each round's deliveries/s over the baseline's
    /// round of the same number, when both ran the same rounds, more than one. The rounds
    /// alternate (ceiling, forwarder, pipeline, isolation, many), so a round is set against
    /// the baseline's run just before it, at the machine's speed of the moment; the ratio of
    /// the medians can set a fast round against a slow one.
    pub throughput_ratio_paired: Option<f64>,
    /// Round against round, as `throughput_ratio_paired`: CPU per delivery.
    pub cpu_ratio_paired: Option<f64>,
    /// Once delivering: its `after_first_per_s` over the baseline's. The start-up (the
    /// group join, the clients built) is left out of both.
    pub throughput_ratio_after_first: Option<f64>,
    /// Once delivering: its `cpu_ms_per_1k_after_first` over the baseline's.
    pub cpu_ratio_after_first: Option<f64>,
    /// Figures of its own (in-flight limit, idle CPU, RSS per 10,000 endpoints...).
    pub notes: BTreeMap<String, f64>,
    /// Each round.
    pub runs: Vec<Measured>,
}

impl ScenarioResult {
    /// The medians of `runs`.
    pub fn of(scenario: &str, what: String, runs: Vec<Measured>) -> Self {
        let median = |f: fn(&Measured) -> f64| Spread::of(runs.iter().map(f)).median;
        let lateness = runs
            .iter()
            .any(|run| run.lateness.count > 0)
            .then(|| Percentiles {
                count: runs.iter().map(|run| run.lateness.count).sum(),
                p50_ms: median(|run| run.lateness.p50_ms),
                p99_ms: median(|run| run.lateness.p99_ms),
                max_ms: median(|run| run.lateness.max_ms),
            });
        ScenarioResult {
            scenario: scenario.to_owned(),
            what,
            deliveries: runs.first().map_or(0, |run| run.deliveries),
            deliveries_per_s: median(|run| run.deliveries_per_s),
            latency: Percentiles {
                count: runs.iter().map(|run| run.latency.count).sum(),
                p50_ms: median(|run| run.latency.p50_ms),
                p99_ms: median(|run| run.latency.p99_ms),
                max_ms: median(|run| run.latency.max_ms),
            },
            lateness,
            cpu_ms_per_1k_deliveries: median(|run| run.cpu_ms_per_1k_deliveries),
            after_first_per_s: median(|run| run.after_first_per_s),
            cpu_ms_per_1k_after_first: median(|run| run.cpu_ms_per_1k_after_first),
            peak_rss_mib: median(|run| run.peak_rss_mib),
            broker_cpu_ms_per_1k_deliveries: runs
                .iter()
                .all(|run| run.broker_cpu_ms_per_1k_deliveries.is_some())
                .then(|| median(|run| run.broker_cpu_ms_per_1k_deliveries.unwrap_or(f64::NAN))),
            against: None,
            throughput_ratio: None,
            cpu_ratio: None,
            throughput_ratio_paired: None,
            cpu_ratio_paired: None,
            throughput_ratio_after_first: None,
            cpu_ratio_after_first: None,
            notes: BTreeMap::new(),
            runs,
        }
    }

    /// Notes a figure of its own.
    pub fn note(&mut self, name: &str, value: f64) {
        self.notes.insert(name.to_owned(), value);
    }

    fn compare(&mut self, baseline: &ScenarioResult) {
        self.against = Some(baseline.scenario.clone());
        self.throughput_ratio = Some(self.deliveries_per_s / baseline.deliveries_per_s);
        self.cpu_ratio = Some(self.cpu_ms_per_1k_deliveries / baseline.cpu_ms_per_1k_deliveries);
        self.throughput_ratio_paired = self.paired(baseline, |run| run.deliveries_per_s);
        self.cpu_ratio_paired = self.paired(baseline, |run| run.cpu_ms_per_1k_deliveries);
        let finite = |ratio: f64| ratio.is_finite().then_some(ratio);
        self.throughput_ratio_after_first =
            finite(self.after_first_per_s / baseline.after_first_per_s);
        self.cpu_ratio_after_first =
            finite(self.cpu_ms_per_1k_after_first / baseline.cpu_ms_per_1k_after_first);
    }

    /// The median over the rounds of this round's measure over the baseline's same round.
    fn paired(&self, baseline: &ScenarioResult, measure: fn(&Measured) -> f64) -> Option<f64> {
        (self.runs.len() > 1 && self.runs.len() == baseline.runs.len()).then(|| {
            let ratios = self
                .runs
                .iter()
                .zip(&baseline.runs)
                .map(|(run, base)| measure(run) / measure(base));
            Spread::of(ratios).median
        })
    }
}

/// The neighbours sweep's baseline: the healthy endpoint alone.
const NEIGHBOURS_ALONE: &str = "neighbours-alone";

/// The ratios the issue names; `null` when a scenario they need did not run.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Ratios {
    /// Pipeline deliveries/s over the forwarder's.
    pub pipeline_vs_forwarder: Option<f64>,
    /// Pipeline deliveries/s over the ceiling's.
    pub pipeline_vs_ceiling: Option<f64>,
    /// Isolation's healthy deliveries/s over the pipeline's.
    pub isolation_healthy_throughput: Option<f64>,
    /// Isolation's healthy p99 latency over the pipeline's.
    pub isolation_healthy_p99: Option<f64>,
    /// Retry timing: p99 lateness of the retries, ms.
    pub retry_lateness_p99_ms: Option<f64>,
}

/// One target of the issue, and whether this run met it.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// What is measured.
    pub what: String,
    /// The figure.
    pub value: f64,
    /// The bound, as text (`>= 1.0x`).
    pub bound: String,
    /// Whether it was met; `None` in a quick run (tiny sizes judge nothing).
    pub met: Option<bool>,
    /// The figure's smallest and largest over the rounds, when it is a median of rounds.
    pub range: Option<[f64; 2]>,
}

/// Everything `hookline-bench all` found.
#[derive(Clone, Debug, Serialize)]
pub struct Results {
    /// When it ran (UTC).
    pub date: String,
    /// Where.
    pub machine: Machine,
    /// With what.
    pub versions: Versions,
    /// The sizes.
    pub sizes: Sizes,
    /// `HOOKLINE_<SECTION>__<KEY>` variables that overrode the dispatcher's config.
    pub hookline_overrides: Vec<String>,
    /// Each scenario, in the order they ran.
    pub scenarios: Vec<ScenarioResult>,
    /// The ratios.
    pub ratios: Ratios,
    /// The targets.
    pub targets: Vec<Target>,
}

impl Results {
    /// Compares each scenario with its baseline and works out the ratios and targets.
    pub fn new(
        machine: Machine,
        versions: Versions,
        sizes: Sizes,
        hookline_overrides: Vec<String>,
        mut scenarios: Vec<ScenarioResult>,
    ) -> Self {
        let find = |scenarios: &[ScenarioResult], name: &str| {
            scenarios.iter().find(|s| s.scenario == name).cloned()
        };
        let (ceiling, forwarder, pipeline) = (
            find(&scenarios, "ceiling"),
            find(&scenarios, "forwarder"),
            find(&scenarios, "pipeline"),
        );
        let alone = find(&scenarios, NEIGHBOURS_ALONE);
        for scenario in &mut scenarios {
            let baseline = match scenario.scenario.as_str() {
                "ceiling" | NEIGHBOURS_ALONE => None,
                "forwarder" => ceiling.as_ref(),
                "pipeline" => forwarder.as_ref(),
                name if name.starts_with("neighbours-") => alone.as_ref(),
                _ => pipeline.as_ref(),
            };
            if let Some(baseline) = baseline {
                scenario.compare(baseline);
            }
        }
        if let (Some(many), Some(pipeline)) = (
            scenarios.iter_mut().find(|s| s.scenario == "many"),
            pipeline.as_ref(),
        ) && let Some(endpoints) = many.notes.get("endpoints").copied()
        {
            let growth = (many.peak_rss_mib - pipeline.peak_rss_mib) * 10_000.0 / endpoints;
            many.note("rss_growth_mib_per_10k_endpoints", growth);
        }
        let get = |name: &str| scenarios.iter().find(|s| s.scenario == name);
        let ratio = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b);
        let dps = |s: Option<&ScenarioResult>| s.map(|s| s.deliveries_per_s);
        let p99 = |s: Option<&ScenarioResult>| s.map(|s| s.latency.p99_ms);
        let ratios = Ratios {
            pipeline_vs_forwarder: ratio(dps(get("pipeline")), dps(get("forwarder"))),
            pipeline_vs_ceiling: ratio(dps(get("pipeline")), dps(get("ceiling"))),
            isolation_healthy_throughput: ratio(dps(get("isolation")), dps(get("pipeline"))),
            isolation_healthy_p99: ratio(p99(get("isolation")), p99(get("pipeline"))),
            retry_lateness_p99_ms: get("retry").and_then(|s| s.lateness.map(|l| l.p99_ms)),
        };
        let targets = targets(&scenarios, &ratios, sizes.quick);
        Results {
            date: jiff::Timestamp::now()
                .round(jiff::Unit::Second)
                .map_or_else(
                    |_| jiff::Timestamp::now().to_string(),
                    |now| now.to_string(),
                ),
            machine,
            versions,
            sizes,
            hookline_overrides,
            scenarios,
            ratios,
            targets,
        }
    }
}

/// The targets that this run's scenarios measure.
fn targets(scenarios: &[ScenarioResult], ratios: &Ratios, quick: bool) -> Vec<Target> {
    let mut out = Vec::new();
    let mut ranged = |what: String,
                      value: Option<f64>,
                      range: Option<[f64; 2]>,
                      at_least: bool,
                      bound: f64,
                      unit: &str| {
        if let Some(value) = value {
            let met = if at_least {
                value >= bound
            } else {
                value <= bound
            };
            out.push(Target {
                what,
                value,
                bound: format!("{} {bound}{unit}", if at_least { ">=" } else { "<=" }),
                met: (!quick).then_some(met),
                range,
            });
        }
    };
    let mut add = |what: String, value: Option<f64>, at_least: bool, bound: f64, unit: &str| {
        ranged(what, value, None, at_least, bound, unit);
    };
    let get = |name: &str| scenarios.iter().find(|s| s.scenario == name);
    add(
        "pipeline / forwarder throughput".into(),
        ratios.pipeline_vs_forwarder,
        true,
        1.0,
        "x",
    );
    add(
        "pipeline / forwarder CPU per delivery".into(),
        get("pipeline").and_then(|s| s.cpu_ratio),
        false,
        1.3,
        "x",
    );
    if let Some(pipeline) = get("pipeline") {
        add(
            "pipeline / forwarder throughput, round against round".into(),
            pipeline.throughput_ratio_paired,
            true,
            1.0,
            "x",
        );
        add(
            "pipeline / forwarder CPU per delivery, round against round".into(),
            pipeline.cpu_ratio_paired,
            false,
            1.3,
            "x",
        );
        add(
            "pipeline / forwarder throughput, once delivering".into(),
            pipeline.throughput_ratio_after_first,
            true,
            1.0,
            "x",
        );
        add(
            "pipeline / forwarder CPU per delivery, once delivering".into(),
            pipeline.cpu_ratio_after_first,
            false,
            1.3,
            "x",
        );
    }
    add(
        "many endpoints / pipeline throughput".into(),
        get("many").and_then(|s| s.throughput_ratio),
        true,
        0.8,
        "x",
    );
    for slow in scenarios.iter().filter(|s| s.scenario.starts_with("slow-")) {
        add(
            format!("{}: share of in-flight / 100 ms, running", slow.scenario),
            slow.notes.get("share_of_limit_running").copied(),
            true,
            0.8,
            "",
        );
        if slow.notes.get("in_flight").is_some_and(|n| *n >= 2_000.0) {
            add(
                format!("{}: peak RSS (MiB)", slow.scenario),
                Some(slow.peak_rss_mib),
                false,
                143.0,
                " (150 MB)",
            );
        }
    }
    add(
        "isolation: healthy throughput / pipeline".into(),
        ratios.isolation_healthy_throughput,
        true,
        0.9,
        "x",
    );
    add(
        "isolation: healthy p99 / pipeline".into(),
        ratios.isolation_healthy_p99,
        false,
        1.5,
        "x",
    );
    add(
        "retry lateness p99 (ms)".into(),
        ratios.retry_lateness_p99_ms,
        false,
        250.0,
        "",
    );
    add(
        "idle CPU with only delayed records (% of a core)".into(),
        get("retry").and_then(|s| s.notes.get("idle_cpu_percent").copied()),
        false,
        2.0,
        "",
    );
    add(
        "latency under load: p99 (ms)".into(),
        get("latency").map(|s| s.latency.p99_ms),
        false,
        50.0,
        "",
    );
    let neighbours = scenarios
        .iter()
        .filter(|s| s.scenario.starts_with("neighbours-") && s.scenario != NEIGHBOURS_ALONE);
    for point in neighbours {
        // The median over the rounds of each round's ratio, with its range; a run of one
        // round has only the ratio.
        let judged = |note: &str, single: Option<f64>| {
            let get = |suffix: &str| point.notes.get(&format!("{note}{suffix}")).copied();
            let range = get("_min").zip(get("_max")).map(|(min, max)| [min, max]);
            (get("").or(single), range)
        };
        let (value, range) = judged("thr_vs_alone", point.throughput_ratio);
        ranged(
            format!("{}: healthy throughput / alone", point.scenario),
            value,
            range,
            true,
            0.9,
            "x",
        );
        let (value, range) = judged("p99_vs_alone", None);
        ranged(
            format!("{}: healthy p99 / alone", point.scenario),
            value,
            range,
            false,
            1.5,
            "x",
        );
    }
    out
}

#[cfg(test)]
pub(crate) mod tests;
