//! The printed table of `hookline-bench all`.

use std::fmt::Write as _;

use super::Results;
use crate::text_table;

impl Results {
    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let m = &self.machine;
        let v = &self.versions;
        let _ = writeln!(
            out,
            "hookline-bench all{}, {}",
            if self.sizes.quick { " --quick" } else { "" },
            self.date
        );
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
        if !self.hookline_overrides.is_empty() {
            let _ = writeln!(
                out,
                "overrides: {} (hookline's environment)",
                self.hookline_overrides.join(" ")
            );
        }
        let _ = writeln!(
            out,
            "latency: publish to 2xx (a backlog published before the contestant started counts from its start); \
             medians over {} rounds for ceiling, forwarder, pipeline",
            self.sizes.rounds
        );
        let _ = writeln!(out);
        let mut table = text_table::new(&[
            "scenario",
            "deliveries",
            "deliveries/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "CPU ms/1k",
            "RSS MiB",
            "broker ms/1k",
            "vs",
            "thr x",
            "CPU x",
        ]);
        for s in &self.scenarios {
            let ratio = |r: Option<f64>| r.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}"));
            table.add_row([
                s.scenario.clone(),
                s.deliveries.to_string(),
                format!("{:.0}", s.deliveries_per_s),
                format!("{:.1}", s.latency.p50_ms),
                format!("{:.1}", s.latency.p99_ms),
                format!("{:.1}", s.latency.max_ms),
                format!("{:.1}", s.cpu_ms_per_1k_deliveries),
                format!("{:.1}", s.peak_rss_mib),
                s.broker_cpu_ms_per_1k_deliveries
                    .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.1}")),
                s.against.clone().unwrap_or_else(|| "-".to_owned()),
                ratio(s.throughput_ratio),
                ratio(s.cpu_ratio),
            ]);
        }
        out.push_str(&text_table::render(&table));
        let paired: Vec<String> = self
            .scenarios
            .iter()
            .filter_map(|s| {
                let (thr, cpu) = s.throughput_ratio_paired.zip(s.cpu_ratio_paired)?;
                Some(format!(
                    "{} / {} thr {thr:.2}x CPU {cpu:.2}x",
                    s.scenario,
                    s.against.as_deref()?
                ))
            })
            .collect();
        if !paired.is_empty() {
            let _ = writeln!(
                out,
                "round against round (the median of each round over its baseline's round): {}",
                paired.join("; ")
            );
        }
        if let Some(p) = self.scenarios.iter().find(|s| s.scenario == "pipeline")
            && let Some((thr, cpu)) = p.throughput_ratio_after_first.zip(p.cpu_ratio_after_first)
        {
            let _ = writeln!(
                out,
                "once delivering (from the first delivery on, the start-up left out of both): pipeline {:.1} CPU ms/1k, {} / {} thr {thr:.2}x CPU {cpu:.2}x",
                p.cpu_ms_per_1k_after_first,
                p.scenario,
                p.against.as_deref().unwrap_or("-"),
            );
        }
        let _ = writeln!(out);
        for s in &self.scenarios {
            let _ = write!(out, "{:<11} {}", s.scenario, s.what);
            if let Some(l) = &s.lateness {
                let _ = write!(
                    out,
                    "; retry lateness p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} retries)",
                    l.p50_ms, l.p99_ms, l.max_ms, l.count
                );
            }
            for (name, value) in &s.notes {
                let _ = write!(out, "; {name} {value:.2}");
            }
            if let Some(d) = s.runs.last().and_then(|run| run.hookline) {
                let _ = write!(
                    out,
                    "; metrics: {} succeeded, {} retry_scheduled, {} dlq",
                    d.succeeded, d.retry_scheduled, d.dlq
                );
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(out);
        let r = &self.ratios;
        let f = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
        let _ = writeln!(
            out,
            "ratios: pipeline_vs_forwarder {}  pipeline_vs_ceiling {}  isolation_healthy_throughput {}  \
             isolation_healthy_p99 {}  retry_lateness_p99_ms {}",
            f(r.pipeline_vs_forwarder),
            f(r.pipeline_vs_ceiling),
            f(r.isolation_healthy_throughput),
            f(r.isolation_healthy_p99),
            f(r.retry_lateness_p99_ms)
        );
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "targets{}:",
            if self.sizes.quick {
                " (quick run: sizes too small to judge)"
            } else {
                ""
            }
        );
        let width = self.targets.iter().map(|t| t.what.len()).max().unwrap_or(0);
        for t in &self.targets {
            let verdict = match t.met {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "-",
            };
            let range = t.range.map_or_else(String::new, |[min, max]| {
                format!("  (rounds {min:.2}-{max:.2})")
            });
            let _ = writeln!(
                out,
                "  {:<width$} {:>10.2}  {:<16} {verdict}{range}",
                t.what, t.value, t.bound
            );
        }
        out
    }
}
