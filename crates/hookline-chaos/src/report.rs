//! The suite's report: one row per scenario (a table for people, JSON for machines), with
//! what failed. A scenario fails when a record is lost, a signature does not verify, a
//! record ends other than expected, a DLQ record does not decode or a dispatcher dies by
//! itself; timings are reported, never judged.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::analysis::{Departure, EndpointFigures, Figures, Percentiles};
use crate::timeline::Fault;
use hookline_testkit::Machine;

/// One scenario's results.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ScenarioReport {
    /// Short name, e.g. `kill-9`.
    pub name: String,
    /// What it does.
    pub title: String,
    /// Its parameters (events, rate, faults).
    pub settings: serde_json::Value,
    /// What became of the records.
    pub figures: Figures,
    /// The README's bound on re-deliveries for the faults of this run.
    pub duplicate_bound: u64,
    /// Whether the duplicates stayed within it.
    pub duplicates_within_bound: bool,
    /// Each replica's departure (kills, stops) and what followed.
    pub departures: Vec<Departure>,
    /// The longest stall of each partition (healthy endpoints' events).
    pub partition_stalls: BTreeMap<i32, f64>,
    /// Each endpoint's answers and lateness.
    pub endpoints: Vec<EndpointFigures>,
    /// What was done when.
    pub timeline: Vec<Fault>,
    /// DLQ records that did not decode through the registry.
    pub dlq_undecodable: u64,
    /// From the scenario's start to the last outcome.
    pub wall_s: f64,
    /// Why it failed; empty when it passed.
    pub failures: Vec<String>,
    /// Things worth knowing that are not failures.
    pub notes: Vec<String>,
    /// Where its logs and raw records are.
    pub logs: String,
}

impl ScenarioReport {
    /// A scenario that could not run to its end.
    pub fn errored(name: &str, title: &str, error: &anyhow::Error) -> Self {
        ScenarioReport {
            name: name.to_owned(),
            title: title.to_owned(),
            failures: vec![format!("it did not run to its end: {error:#}")],
            ..ScenarioReport::default()
        }
    }

    /// Whether it passed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// Adds the failures its figures show.
    pub fn judge(&mut self) {
        let f = &self.figures;
        let mut failures = Vec::new();
        if f.lost > 0 {
            failures.push(format!("{} lost (e.g. {})", f.lost, f.lost_ids.join(", ")));
        }
        if f.bad_signatures > 0 {
            failures.push(format!("{} signatures did not verify", f.bad_signatures));
        }
        if f.unexpected > 0 {
            failures.push(format!(
                "{} ended otherwise than expected (e.g. {})",
                f.unexpected,
                f.unexpected_examples.first().map_or("", String::as_str)
            ));
        }
        if self.dlq_undecodable > 0 {
            failures.push(format!(
                "{} DLQ records did not decode",
                self.dlq_undecodable
            ));
        }
        self.duplicates_within_bound = f.duplicate_deliveries as u64 <= self.duplicate_bound;
        if !self.duplicates_within_bound {
            self.notes.push(format!(
                "{} duplicate deliveries, beyond the README's bound of {}",
                f.duplicate_deliveries, self.duplicate_bound
            ));
        }
        self.failures.splice(0..0, failures);
    }
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteReport {
    /// When it started (RFC 3339, UTC).
    pub started_at: String,
    /// `short` or `full`.
    pub mode: String,
    /// The command line.
    pub command: String,
    /// The machine.
    pub machine: Machine,
    /// `hookline --version`, librdkafka, the stack and revision label.
    pub versions: BTreeMap<String, String>,
    /// The scenarios, in order.
    pub scenarios: Vec<ScenarioReport>,
    /// Whether every scenario passed.
    pub passed: bool,
}

fn seconds(value: f64) -> String {
    if value.is_finite() {
        format!("{value:.2}")
    } else {
        "-".to_owned()
    }
}

fn spread(p: Option<Percentiles>) -> String {
    p.map_or_else(
        || "-".to_owned(),
        |p| format!("{}/{}/{}", seconds(p.p50), seconds(p.p99), seconds(p.max)),
    )
}

impl SuiteReport {
    /// The table, with a line of detail under a row where there is any.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<18} {:>9} {:>9} {:>6} {:>5} {:>13} {:>7} {:>8} {:>17} {:>9} {:>7}  result",
            "scenario",
            "published",
            "delivered",
            "parked",
            "lost",
            "dups (bound)",
            "bad sig",
            "stall s",
            "late p50/p99/max",
            "slowest s",
            "wall s"
        );
        for s in &self.scenarios {
            let f = &s.figures;
            let _ = writeln!(
                out,
                "{:<18} {:>9} {:>9} {:>6} {:>5} {:>13} {:>7} {:>8} {:>17} {:>9} {:>7}  {}",
                s.name,
                f.published,
                f.delivered,
                f.parked,
                f.lost,
                format!("{} ({})", f.duplicate_deliveries, s.duplicate_bound),
                f.bad_signatures,
                seconds(f.longest_stall.seconds),
                spread(f.lateness),
                seconds(f.latency.map_or(f64::NAN, |l| l.max)),
                seconds(s.wall_s),
                if s.passed() { "PASS" } else { "FAIL" }
            );
            for line in details(s) {
                let _ = writeln!(out, "    {line}");
            }
        }
        out
    }
}

/// The lines under a scenario's row: its departures, parked reasons, endpoints, failures.
fn details(s: &ScenarioReport) -> Vec<String> {
    let mut lines = Vec::new();
    if !s.departures.is_empty() {
        let resumed = Percentiles::of(
            s.departures
                .iter()
                .filter_map(|d| d.resumed_after_s)
                .collect(),
        );
        let others = Percentiles::of(
            s.departures
                .iter()
                .map(|d| d.others_longest_stall_s)
                .collect(),
        );
        lines.push(format!(
            "{} departures: their partitions resumed after p50 {} s, max {} s; the other partitions' longest stall meanwhile p50 {} s, max {} s",
            s.departures.len(),
            resumed.map_or("-".to_owned(), |p| seconds(p.p50)),
            resumed.map_or("-".to_owned(), |p| seconds(p.max)),
            others.map_or("-".to_owned(), |p| seconds(p.p50)),
            others.map_or("-".to_owned(), |p| seconds(p.max)),
        ));
    }
    if let Some((partition, stall)) = s.partition_stalls.iter().max_by(|a, b| a.1.total_cmp(b.1)) {
        lines.push(format!(
            "longest stall of one partition: {} s (partition {partition})",
            seconds(*stall)
        ));
    }
    if !s.figures.parked_by_reason.is_empty() {
        let reasons: Vec<String> = s
            .figures
            .parked_by_reason
            .iter()
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect();
        lines.push(format!("parked by reason: {}", reasons.join(", ")));
    }
    if s.endpoints.len() > 1 {
        for e in &s.endpoints {
            let answers: Vec<String> = e.answers.iter().map(|(a, n)| format!("{a}×{n}")).collect();
            lines.push(format!(
                "endpoint {}: {} requests ({}), lateness p50/p99/max {} s",
                e.name,
                e.requests,
                answers.join(" "),
                spread(e.lateness)
            ));
        }
    }
    lines.extend(s.notes.iter().map(|note| format!("note: {note}")));
    lines.extend(
        s.failures
            .iter()
            .map(|failure| format!("FAILED: {failure}")),
    );
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Stall;

    fn suite(scenarios: Vec<ScenarioReport>) -> SuiteReport {
        SuiteReport {
            started_at: "2026-12-01T10:00:00Z".to_owned(),
            mode: "short".to_owned(),
            command: "deploy/chaos --short".to_owned(),
            machine: Machine::detect(),
            versions: BTreeMap::new(),
            passed: scenarios.iter().all(ScenarioReport::passed),
            scenarios,
        }
    }

    fn scenario(lost: usize, bad: usize) -> ScenarioReport {
        let mut report = ScenarioReport {
            name: "kill-9".to_owned(),
            figures: Figures {
                published: 100,
                delivered: 100 - lost,
                lost,
                lost_ids: (0..lost).map(|n| format!("e{n}")).collect(),
                bad_signatures: bad,
                duplicate_deliveries: 7,
                longest_stall: Stall {
                    seconds: 1.5,
                    from: 3.0,
                },
                lateness: Percentiles::of(vec![0.01, 0.02, 0.5]),
                ..Figures::default()
            },
            duplicate_bound: 5,
            wall_s: 12.345,
            ..ScenarioReport::default()
        };
        report.judge();
        report
    }

    #[test]
    fn loss_and_bad_signatures_fail_and_duplicates_are_only_noted() {
        let clean = scenario(0, 0);
        assert!(clean.passed(), "{:?}", clean.failures);
        assert!(!clean.duplicates_within_bound);
        assert!(clean.notes[0].contains("beyond the README's bound of 5"));
        let lossy = scenario(2, 0);
        assert!(!lossy.passed());
        assert_eq!(lossy.failures, ["2 lost (e.g. e0, e1)"]);
        assert!(!scenario(0, 1).passed());
    }

    #[test]
    fn the_table_has_a_row_per_scenario_with_its_figures() {
        let table = suite(vec![scenario(0, 0), scenario(1, 0)]).table();
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("scenario"));
        let rows: Vec<&&str> = lines.iter().filter(|l| l.starts_with("kill-9")).collect();
        assert_eq!(rows.len(), 2);
        assert!(
            rows[0].contains("7 (5)") && rows[0].contains("1.50"),
            "{}",
            rows[0]
        );
        assert!(
            rows[0].contains("0.02/0.50/0.50") && rows[0].ends_with("PASS"),
            "{}",
            rows[0]
        );
        assert!(rows[1].ends_with("FAIL"));
        assert!(table.contains("FAILED: 1 lost (e.g. e0)"));
    }

    #[test]
    fn the_json_holds_every_field() {
        let report = suite(vec![scenario(0, 0)]);
        let json: serde_json::Value = serde_json::to_value(&report).unwrap();
        assert_eq!(json["passed"], true);
        let s = &json["scenarios"][0];
        assert_eq!(s["figures"]["duplicate_deliveries"], 7);
        assert_eq!(s["figures"]["longest_stall"]["seconds"], 1.5);
        assert_eq!(s["figures"]["lateness"]["count"], 3);
        assert_eq!(s["duplicate_bound"], 5);
        assert!(json["machine"]["nproc"].as_u64().unwrap() >= 1);
        let errored = ScenarioReport::errored("x", "y", &anyhow::anyhow!("boom"));
        assert!(!errored.passed() && errored.failures[0].contains("boom"));
    }
}
