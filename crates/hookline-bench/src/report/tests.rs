use super::*;

#[test]
fn median_and_range() {
    let s = Spread::of([3.0, 1.0, 2.0].into_iter());
    assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
    assert_eq!(s.plus_minus_percent(), 50.0);
    assert_eq!(Spread::of([4.0, 1.0].into_iter()).median, 2.5);
}

/// A run of `kind` delivering `deliveries` in `wall_s` with `cpu_s` and `rss` MiB.
fn run(kind: Kind, round: u32, deliveries: u64, wall_s: f64, cpu_s: f64, rss: f64) -> RunResult {
    let events = match kind {
        Kind::Fanout => deliveries / 100,
        Kind::Baseline | Kind::Hookline | Kind::NoAttemptLog => deliveries,
    };
    RunResult {
        contestant: kind,
        round,
        events,
        deliveries,
        wall_s,
        events_per_s: events as f64 / wall_s,
        deliveries_per_s: deliveries as f64 / wall_s,
        first_delivery_s: 0.5,
        after_first_events_per_s: events as f64 / (wall_s - 0.5),
        peak_rss_mib: rss,
        cpu_s,
        cpu_ms_per_1k_events: cpu_s * 1e6 / events as f64,
        cpu_ms_per_1k_deliveries: cpu_s * 1e6 / deliveries as f64,
        requests: deliveries,
        broker_cpu_s: None,
        hookline_deliveries: None,
    }
}

fn report(runs: Vec<RunResult>) -> Report {
    let machine = Machine {
        nproc: 2,
        cpu: "test".to_owned(),
        memory_gib: 1.0,
        kernel: "test".to_owned(),
    };
    let versions = Versions {
        hookline: "hookline 0".to_owned(),
        bench: "0".to_owned(),
        librdkafka: "2".to_owned(),
        rustc: None,
        label: String::new(),
    };
    let workload = Workload {
        events: 20_000,
        partitions: 6,
        concurrency: 16,
        payload_bytes: 256,
        rounds: 1,
        fanout_events: 1_000,
        fanout_endpoints: 100,
        hookline_overrides: Vec::new(),
    };
    Report::new(machine, versions, workload, runs)
}

#[test]
fn fanout_ratios_are_per_delivery_against_direct_hookline() {
    let report = report(vec![
        run(Kind::Baseline, 1, 20_000, 1.0, 0.8, 30.0),
        run(Kind::Hookline, 1, 20_000, 2.0, 1.6, 50.0),
        run(Kind::Fanout, 1, 100_000, 20.0, 4.0, 75.0),
    ]);
    let r = report.fanout_ratios.expect("fan-out ratios");
    // 5,000 deliveries/s against 10,000; 40 µs of CPU per delivery against 80.
    assert!((r.deliveries_per_s - 0.5).abs() < 1e-9);
    assert!((r.cpu_per_delivery - 0.5).abs() < 1e-9);
    assert!((r.peak_rss - 1.5).abs() < 1e-9);
    let table = report.table();
    assert!(table.contains("fanout / direct hookline: deliveries/s 0.50x, CPU per delivery 0.50x"));
    assert!(table.contains("fan-out stage on"));
    assert!(table.lines().any(|line| line.starts_with("  fanout ")
        && line.contains("#1")
        && line.contains("deliveries/s")));
}

#[test]
fn no_fanout_runs_no_fanout_figures() {
    let report = report(vec![
        run(Kind::Baseline, 1, 20_000, 1.0, 0.8, 30.0),
        run(Kind::Hookline, 1, 20_000, 2.0, 1.6, 50.0),
    ]);
    assert!(report.fanout.is_none() && report.fanout_ratios.is_none());
    assert!(!report.table().contains("fanout / direct"));
    assert!(report.attempt_log_ratios.is_none());
    assert!(!report.table().contains("attempt log on / off"));
}

#[test]
fn attempt_log_ratios_are_hookline_over_hookline_without_it() {
    let report = report(vec![
        run(Kind::Baseline, 1, 20_000, 1.0, 0.8, 30.0),
        run(Kind::Hookline, 1, 20_000, 2.0, 1.6, 50.0),
        run(Kind::NoAttemptLog, 1, 20_000, 1.6, 1.2, 40.0),
    ]);
    let r = report.attempt_log_ratios.expect("attempt log ratios");
    // 10,000 events/s against 12,500; 80 µs of CPU per event against 60.
    assert!((r.throughput - 0.8).abs() < 1e-9);
    assert!((r.cpu_per_event - 4.0 / 3.0).abs() < 1e-9);
    assert!((r.peak_rss - 1.25).abs() < 1e-9);
    let table = report.table();
    assert!(
        table.contains("attempt log on / off: throughput 0.80x"),
        "{table}"
    );
    assert!(table.lines().any(|line| line.starts_with("no-log ")));
    let json = serde_json::to_value(&report).expect("json");
    assert_eq!(json["runs"][2]["contestant"], "hookline_no_attempt_log");
}

#[test]
fn the_tables_headers_stand_over_their_columns() {
    let report = report(vec![
        run(Kind::Baseline, 1, 20_000, 1.0, 0.8, 30.0),
        run(Kind::Hookline, 1, 20_000, 2.0, 1.6, 50.0),
        run(Kind::NoAttemptLog, 1, 20_000, 1.6, 1.2, 40.0),
        run(Kind::Fanout, 1, 100_000, 20.0, 4.0, 75.0),
    ]);
    let table = report.table();
    let cells = crate::text_table::aligned_cells(&table, "median ", "hookline ");
    let expected = [
        ("median", "hookline"),
        ("throughput (events/s)", "10000 ±0%"),
        ("peak RSS (MiB)", "50.0 ±0%"),
        ("CPU ms / 1000 events", "80 ±0%"),
        ("1st delivery (s)", "0.50"),
    ];
    assert_eq!(cells, expected.map(|(h, c)| (h.to_owned(), c.to_owned())));
    crate::text_table::aligned_cells(&table, "median ", "no-log ");
    let cells = crate::text_table::aligned_cells(&table, "median ", "fanout ");
    assert_eq!(cells[0], ("median".to_owned(), "fanout".to_owned()));
    assert_eq!(cells[1].1, "5000 ±0%");
}
