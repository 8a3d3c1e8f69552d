//! The results: each run, the median and spread per contestant, the ratios
//! hookline/baseline and fan-out/direct hookline, as a table or as JSON.

use std::fmt::Write as _;

use serde::Serialize;

pub use crate::contest::Deliveries;
use crate::machine::{Machine, Versions};
use crate::text_table;

/// Who ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The minimal forwarder.
    Baseline,
    /// `hookline dispatch` on the direct backlog.
    Hookline,
    /// `hookline dispatch` on the direct backlog with its attempt log off
    /// (`[attempts] enabled = false`): what the attempt log costs.
    #[serde(rename = "hookline_no_attempt_log")]
    NoAttemptLog,
    /// `hookline dispatch` on the fan-out backlog (tenant events to many endpoints).
    Fanout,
}

impl Kind {
    /// Its name in tables, logs and group ids.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Baseline => "baseline",
            Kind::Hookline => "hookline",
            Kind::NoAttemptLog => "no-log",
            Kind::Fanout => "fanout",
        }
    }
}

/// One run of one contestant. In a fan-out run the events are tenant events, each
/// delivered to every endpoint; in the others an event is one delivery.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// Who ran.
    pub contestant: Kind,
    /// Which round (from 1).
    pub round: u32,
    /// Events in the backlog.
    pub events: u64,
    /// Deliveries the sink waited for: `events`, or `events` × endpoints in a fan-out run.
    pub deliveries: u64,
    /// From starting the process until the sink had every delivery, in seconds.
    pub wall_s: f64,
    /// Events over `wall_s`.
    pub events_per_s: f64,
    /// Deliveries over `wall_s`.
    pub deliveries_per_s: f64,
    /// From starting the process until the first delivery, in seconds.
    pub first_delivery_s: f64,
    /// Events over the time from the first delivery to the last (start-up left out).
    pub after_first_events_per_s: f64,
    /// Peak RSS (VmHWM) just before SIGTERM, in MiB.
    pub peak_rss_mib: f64,
    /// User plus system CPU time just before SIGTERM, in seconds.
    pub cpu_s: f64,
    /// `cpu_s` per 1000 events, in milliseconds.
    pub cpu_ms_per_1k_events: f64,
    /// `cpu_s` per 1000 deliveries, in milliseconds.
    pub cpu_ms_per_1k_deliveries: f64,
    /// The broker's CPU time over the run, in seconds, when it runs on this machine.
    pub broker_cpu_s: Option<f64>,
    /// HTTP requests the sink received (more than the deliveries when some were repeated).
    pub requests: u64,
    /// hookline's own counts (`/metrics`), for hookline's and the fan-out's runs.
    pub hookline_deliveries: Option<Deliveries>,
}

/// The median of a measure over the rounds, and its range.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Spread {
    pub(crate) fn of(values: impl Iterator<Item = f64>) -> Self {
        let mut values: Vec<f64> = values.collect();
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => values[n / 2],
            _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        };
        Spread {
            median,
            min: values.first().copied().unwrap_or(f64::NAN),
            max: values.last().copied().unwrap_or(f64::NAN),
        }
    }

    /// Half the range, as a percentage of the median.
    fn plus_minus_percent(&self) -> f64 {
        (self.max - self.min) / 2.0 / self.median * 100.0
    }

    /// The median without decimals and ± half the range, e.g. `1581 ±23%`.
    pub(crate) fn cell(&self) -> String {
        format!("{:.0} ±{:.0}%", self.median, self.plus_minus_percent())
    }
}

/// One contestant over all its rounds.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Throughput, events per second.
    pub events_per_s: Spread,
    /// Throughput, deliveries per second.
    pub deliveries_per_s: Spread,
    /// Peak RSS, MiB.
    pub peak_rss_mib: Spread,
    /// CPU time per 1000 events, milliseconds.
    pub cpu_ms_per_1k_events: Spread,
    /// CPU time per 1000 deliveries, milliseconds.
    pub cpu_ms_per_1k_deliveries: Spread,
    /// Time to the first delivery, seconds.
    pub first_delivery_s: Spread,
    /// Throughput after the first delivery, events per second.
    pub after_first_events_per_s: Spread,
}

impl Summary {
    fn of(runs: &[RunResult], kind: Kind) -> Self {
        let mine = || runs.iter().filter(move |run| run.contestant == kind);
        Summary {
            events_per_s: Spread::of(mine().map(|run| run.events_per_s)),
            deliveries_per_s: Spread::of(mine().map(|run| run.deliveries_per_s)),
            peak_rss_mib: Spread::of(mine().map(|run| run.peak_rss_mib)),
            cpu_ms_per_1k_events: Spread::of(mine().map(|run| run.cpu_ms_per_1k_events)),
            cpu_ms_per_1k_deliveries: Spread::of(mine().map(|run| run.cpu_ms_per_1k_deliveries)),
            first_delivery_s: Spread::of(mine().map(|run| run.first_delivery_s)),
            after_first_events_per_s: Spread::of(mine().map(|run| run.after_first_events_per_s)),
        }
    }
}

/// hookline's medians over the baseline's: above 1 means hookline is faster (throughput)
/// or heavier (RSS, CPU).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Ratios {
    /// Events per second.
    pub throughput: f64,
    /// Peak RSS.
    pub peak_rss: f64,
    /// CPU time per event.
    pub cpu_per_event: f64,
    /// Events per second after the first delivery (start-up left out).
    pub throughput_after_first: f64,
}

/// The fan-out runs' medians over direct hookline's of the same run: above 1 means the
/// fan-out delivers faster, or costs more per delivery.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct FanoutRatios {
    /// Deliveries per second.
    pub deliveries_per_s: f64,
    /// CPU time per delivery.
    pub cpu_per_delivery: f64,
    /// Peak RSS.
    pub peak_rss: f64,
}

/// Direct hookline's medians over the same dispatcher's with the attempt log off: above 1
/// means the attempt log makes it faster (throughput) or costs more (RSS, CPU).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct AttemptLogRatios {
    /// Events per second.
    pub throughput: f64,
    /// CPU time per event.
    pub cpu_per_event: f64,
    /// Peak RSS.
    pub peak_rss: f64,
}

/// What each contestant was given.
#[derive(Clone, Debug, Serialize)]
pub struct Workload {
    /// Events in the backlog (JSON-encoded).
    pub events: u64,
    /// Partitions of the events topic.
    pub partitions: i32,
    /// Deliveries in flight at once.
    pub concurrency: u32,
    /// Payload size, bytes.
    pub payload_bytes: u64,
    /// Runs per contestant.
    pub rounds: u32,
    /// Tenant events in the fan-out backlog; 0 when the fan-out scenario was skipped.
    pub fanout_events: u64,
    /// Endpoints of the fan-out's tenant, each subscribed to every event type.
    pub fanout_endpoints: u64,
    /// `HOOKLINE_<SECTION>__<KEY>` variables that overrode the benchmark's dispatcher config.
    pub hookline_overrides: Vec<String>,
}

/// Everything a benchmark run found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// When it ran (UTC).
    pub date: String,
    /// Where.
    pub machine: Machine,
    /// With what.
    pub versions: Versions,
    /// On what.
    pub workload: Workload,
    /// Each run, in the order they ran.
    pub runs: Vec<RunResult>,
    /// The baseline over its rounds.
    pub baseline: Summary,
    /// hookline over its rounds.
    pub hookline: Summary,
    /// hookline / baseline, of the medians.
    pub ratios: Ratios,
    /// The fan-out runs over their rounds, when there were any.
    pub fanout: Option<Summary>,
    /// fanout / direct hookline, of the medians, when there were fan-out runs.
    pub fanout_ratios: Option<FanoutRatios>,
    /// hookline with its attempt log off, over its rounds, when it ran.
    pub no_attempt_log: Option<Summary>,
    /// hookline / hookline without the attempt log, of the medians: the log's cost.
    pub attempt_log_ratios: Option<AttemptLogRatios>,
}

impl Report {
    /// Summarises the runs.
    pub fn new(
        machine: Machine,
        versions: Versions,
        workload: Workload,
        runs: Vec<RunResult>,
    ) -> Self {
        let baseline = Summary::of(&runs, Kind::Baseline);
        let hookline = Summary::of(&runs, Kind::Hookline);
        let ratios = Ratios {
            throughput: hookline.events_per_s.median / baseline.events_per_s.median,
            peak_rss: hookline.peak_rss_mib.median / baseline.peak_rss_mib.median,
            cpu_per_event: hookline.cpu_ms_per_1k_events.median
                / baseline.cpu_ms_per_1k_events.median,
            throughput_after_first: hookline.after_first_events_per_s.median
                / baseline.after_first_events_per_s.median,
        };
        let fanout = runs
            .iter()
            .any(|run| run.contestant == Kind::Fanout)
            .then(|| Summary::of(&runs, Kind::Fanout));
        let fanout_ratios = fanout.as_ref().map(|fanout| FanoutRatios {
            deliveries_per_s: fanout.deliveries_per_s.median / hookline.deliveries_per_s.median,
            cpu_per_delivery: fanout.cpu_ms_per_1k_deliveries.median
                / hookline.cpu_ms_per_1k_deliveries.median,
            peak_rss: fanout.peak_rss_mib.median / hookline.peak_rss_mib.median,
        });
        let no_attempt_log = runs
            .iter()
            .any(|run| run.contestant == Kind::NoAttemptLog)
            .then(|| Summary::of(&runs, Kind::NoAttemptLog));
        let attempt_log_ratios = no_attempt_log.as_ref().map(|off| AttemptLogRatios {
            throughput: hookline.events_per_s.median / off.events_per_s.median,
            cpu_per_event: hookline.cpu_ms_per_1k_events.median / off.cpu_ms_per_1k_events.median,
            peak_rss: hookline.peak_rss_mib.median / off.peak_rss_mib.median,
        });
        Report {
            date: jiff::Timestamp::now()
                .round(jiff::Unit::Second)
                .map_or_else(
                    |_| jiff::Timestamp::now().to_string(),
                    |now| now.to_string(),
                ),
            machine,
            versions,
            workload,
            runs,
            baseline,
            hookline,
            ratios,
            fanout,
            fanout_ratios,
            no_attempt_log,
            attempt_log_ratios,
        }
    }

    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let m = &self.machine;
        let v = &self.versions;
        let w = &self.workload;
        let _ = writeln!(out, "hookline-bench, {}", self.date);
        let _ = writeln!(
            out,
            "machine:   {} CPUs ({}), {:.1} GiB, {}",
            m.nproc, m.cpu, m.memory_gib, m.kernel
        );
        let _ = writeln!(
            out,
            "versions:  {}, librdkafka {}{}{}",
            v.hookline,
            v.librdkafka,
            v.rustc
                .as_deref()
                .map(|rustc| format!(", {rustc}"))
                .unwrap_or_default(),
            if v.label.is_empty() {
                String::new()
            } else {
                format!("; {}", v.label)
            }
        );
        let _ = writeln!(
            out,
            "workload:  {} JSON events of {} B on {} partitions, 1 endpoint (local sink, 204), \
             concurrency {}, {} rounds alternating; hookline's fan-out stage on (idle: no \
             tenant events)",
            w.events, w.payload_bytes, w.partitions, w.concurrency, w.rounds
        );
        if self.fanout.is_some() {
            let _ = writeln!(
                out,
                "fan-out:   {} tenant events of {} B to {} endpoints of one tenant = {} deliveries, \
                 after each round's direct runs; every run on topics of its own",
                w.fanout_events,
                w.payload_bytes,
                w.fanout_endpoints,
                w.fanout_events.saturating_mul(w.fanout_endpoints)
            );
        }
        if !w.hookline_overrides.is_empty() {
            let _ = writeln!(
                out,
                "overrides: {} (hookline's environment)",
                w.hookline_overrides.join(" ")
            );
        }
        let _ = writeln!(out);
        let mut table = text_table::new(&[
            "median",
            "throughput (events/s)",
            "peak RSS (MiB)",
            "CPU ms / 1000 events",
            "1st delivery (s)",
        ]);
        let rows = [
            ("baseline", Some(&self.baseline)),
            ("hookline", Some(&self.hookline)),
        ]
        .into_iter()
        .chain([("no-log", self.no_attempt_log.as_ref())])
        .filter_map(|(name, summary)| summary.map(|summary| (name, summary)));
        for (name, s) in rows {
            table.add_row([
                name.to_owned(),
                cell(&s.events_per_s, 0),
                cell(&s.peak_rss_mib, 1),
                cell(&s.cpu_ms_per_1k_events, 0),
                format!("{:.2}", s.first_delivery_s.median),
            ]);
        }
        out.push_str(&text_table::render(&table));
        let _ = writeln!(out, "(median, ±half the range over the rounds)");
        let _ = writeln!(out);
        let r = &self.ratios;
        let _ = writeln!(
            out,
            "hookline / baseline:  throughput {:.2}x   peak RSS {:.2}x   CPU per event {:.2}x   \
             (throughput after the 1st delivery {:.2}x)",
            r.throughput, r.peak_rss, r.cpu_per_event, r.throughput_after_first
        );
        if let Some(r) = &self.attempt_log_ratios {
            let _ = writeln!(
                out,
                "attempt log on / off: throughput {:.2}x   peak RSS {:.2}x   CPU per event {:.2}x   \
                 (no-log = hookline with [attempts] enabled = false)",
                r.throughput, r.peak_rss, r.cpu_per_event
            );
        }
        let _ = writeln!(out);
        if let (Some(fanout), Some(r)) = (&self.fanout, &self.fanout_ratios) {
            self.fanout_table(&mut out, fanout, r);
        }
        let _ = writeln!(out, "runs:");
        for run in &self.runs {
            let (rate, unit) = match run.contestant {
                Kind::Baseline | Kind::Hookline | Kind::NoAttemptLog => (run.events_per_s, "ev/s"),
                Kind::Fanout => (run.deliveries_per_s, "deliveries/s"),
            };
            let _ = writeln!(
                out,
                "  {:<8} #{}  {:>6.2} s  {:>7.0} {unit}  {:>6.1} MiB  {:>6.2} s CPU{}  {} requests{}",
                run.contestant.name(),
                run.round,
                run.wall_s,
                rate,
                run.peak_rss_mib,
                run.cpu_s,
                run.broker_cpu_s
                    .map(|s| format!(" (broker {s:.2} s)"))
                    .unwrap_or_default(),
                run.requests,
                run.hookline_deliveries
                    .map(|d| format!(
                        "; metrics: {} succeeded, {} retry_scheduled, {} dlq{}",
                        d.succeeded,
                        d.retry_scheduled,
                        d.dlq,
                        if run.contestant == Kind::Fanout {
                            format!(", {} fanned out", d.fanned_out)
                        } else {
                            String::new()
                        }
                    ))
                    .unwrap_or_default()
            );
        }
        out
    }

    /// The fan-out's medians beside direct hookline's, per delivery, and their ratios.
    fn fanout_table(&self, out: &mut String, fanout: &Summary, r: &FanoutRatios) {
        let mut table = text_table::new(&[
            "median",
            "throughput (deliveries/s)",
            "peak RSS (MiB)",
            "CPU ms / 1000 deliveries",
            "1st delivery (s)",
        ]);
        for (name, s) in [("hookline direct", &self.hookline), ("fanout", fanout)] {
            table.add_row([
                name.to_owned(),
                cell(&s.deliveries_per_s, 0),
                cell(&s.peak_rss_mib, 1),
                cell(&s.cpu_ms_per_1k_deliveries, 0),
                format!("{:.2}", s.first_delivery_s.median),
            ]);
        }
        out.push_str(&text_table::render(&table));
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "fanout / direct hookline: deliveries/s {:.2}x, CPU per delivery {:.2}x   \
             (peak RSS {:.2}x)",
            r.deliveries_per_s, r.cpu_per_delivery, r.peak_rss
        );
        let _ = writeln!(out);
    }
}

fn cell(spread: &Spread, decimals: usize) -> String {
    format!(
        "{:.*} ±{:.0}%",
        decimals,
        spread.median,
        spread.plus_minus_percent()
    )
}

#[cfg(test)]
mod tests;
