use super::*;
use crate::stats::Percentiles;

pub(crate) fn measured(
    deliveries: u64,
    wall_s: f64,
    cpu_s: f64,
    rss: f64,
    p99_ms: f64,
) -> Measured {
    Measured {
        deliveries,
        wall_s,
        deliveries_per_s: deliveries as f64 / wall_s,
        first_delivery_s: 0.1,
        after_first_per_s: deliveries as f64 / wall_s,
        peak_rss_mib: rss,
        cpu_s,
        cpu_ms_per_1k_deliveries: cpu_s * 1e6 / deliveries as f64,
        // A tenth of the CPU before the first delivery.
        cpu_ms_per_1k_after_first: cpu_s * 0.9 * 1e6 / (deliveries - 1) as f64,
        broker_cpu_s: Some(cpu_s / 10.0),
        broker_cpu_ms_per_1k_deliveries: Some(cpu_s * 1e5 / deliveries as f64),
        requests: deliveries,
        foreign: 0,
        latency: Percentiles {
            count: deliveries,
            p50_ms: p99_ms / 2.0,
            p99_ms,
            max_ms: p99_ms * 2.0,
        },
        lateness: Percentiles::default(),
        hookline: None,
    }
}

pub(crate) fn results(quick: bool) -> Results {
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
    let one = |name: &str, m: Measured| ScenarioResult::of(name, name.to_owned(), vec![m]);
    let mut many = one("many", measured(100_000, 20.0, 8.0, 80.0, 900.0));
    many.note("endpoints", 10_000.0);
    let mut retry = one("retry", {
        let mut m = measured(3_000, 35.0, 1.0, 40.0, 5_000.0);
        m.lateness = Percentiles {
            count: 3_000,
            p50_ms: 20.0,
            p99_ms: 180.0,
            max_ms: 400.0,
        };
        m
    });
    retry.note("idle_cpu_percent", 0.5);
    let scenarios = vec![
        ScenarioResult::of(
            "ceiling",
            "c".to_owned(),
            vec![
                measured(20_000, 1.0, 0.5, 20.0, 5.0),
                measured(20_000, 2.0, 0.5, 20.0, 5.0),
                measured(20_000, 1.0, 0.5, 20.0, 5.0),
            ],
        ),
        one("forwarder", measured(20_000, 2.0, 1.0, 30.0, 1_500.0)),
        one("pipeline", measured(20_000, 4.0, 2.0, 50.0, 3_000.0)),
        many,
        one("isolation", measured(18_000, 4.0, 2.0, 55.0, 4_500.0)),
        retry,
    ];
    Results::new(
        machine,
        versions,
        Sizes::new(quick, None, None),
        Vec::new(),
        scenarios,
    )
}

/// `scenarios` judged as a full run on this test's machine.
fn judged(scenarios: Vec<ScenarioResult>) -> Results {
    let base = results(false);
    Results::new(
        base.machine,
        base.versions,
        base.sizes,
        Vec::new(),
        scenarios,
    )
}

/// Whether the target named `what` was met; it must have been judged.
fn met(results: &Results, what: &str) -> Option<bool> {
    results
        .targets
        .iter()
        .find(|t| t.what == what)
        .unwrap_or_else(|| panic!("{what}: {:?}", results.targets))
        .met
}

fn scenario<'a>(results: &'a Results, name: &str) -> &'a ScenarioResult {
    results
        .scenarios
        .iter()
        .find(|s| s.scenario == name)
        .expect(name)
}

#[test]
fn the_ratios_are_exactly_the_issues_and_right() {
    let results = results(false);
    let json = serde_json::to_value(results.ratios).expect("json");
    let mut keys: Vec<&str> = json
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "isolation_healthy_p99",
            "isolation_healthy_throughput",
            "pipeline_vs_ceiling",
            "pipeline_vs_forwarder",
            "retry_lateness_p99_ms"
        ]
    );
    let r = results.ratios;
    // Ceiling: median of 20,000, 10,000, 20,000 deliveries/s. Pipeline 5,000, forwarder 10,000.
    assert_eq!(r.pipeline_vs_ceiling, Some(0.25));
    assert_eq!(r.pipeline_vs_forwarder, Some(0.5));
    assert_eq!(r.isolation_healthy_throughput, Some(0.9));
    assert_eq!(r.isolation_healthy_p99, Some(1.5));
    assert_eq!(r.retry_lateness_p99_ms, Some(180.0));
}

#[test]
fn each_scenario_is_compared_with_its_own_baseline() {
    let results = results(false);
    let get = |name: &str| scenario(&results, name);
    assert_eq!(get("ceiling").against, None);
    assert_eq!(get("forwarder").against.as_deref(), Some("ceiling"));
    assert_eq!(get("pipeline").against.as_deref(), Some("forwarder"));
    assert_eq!(get("pipeline").cpu_ratio, Some(2.0));
    assert_eq!(get("many").against.as_deref(), Some("pipeline"));
    assert_eq!(get("many").throughput_ratio, Some(1.0));
    // 80 MiB against 50 MiB, for 10,000 endpoints.
    assert_eq!(get("many").notes["rss_growth_mib_per_10k_endpoints"], 30.0);
    let table = results.table();
    assert!(table.contains("pipeline_vs_forwarder 0.50"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.contains("pipeline / forwarder throughput") && l.contains("NOT met")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.contains("retry lateness p99") && l.ends_with(" met")),
        "{table}"
    );
}

#[test]
fn neighbours_are_set_against_the_healthy_endpoint_alone_and_judged() {
    let point = |name: &str, deliveries_per_s: f64, p99_vs_alone: f64| {
        let mut run = measured(1_000, 1.0, 1.0, 50.0, 1_000.0);
        run.deliveries_per_s = deliveries_per_s;
        let mut result = ScenarioResult::of(name, String::new(), vec![run]);
        result.note("p99_vs_alone", p99_vs_alone);
        result
    };
    let results = judged(vec![
        point("neighbours-alone", 1_000.0, 1.0),
        point("neighbours-slow-20", 950.0, 1.2),
        point("neighbours-hang-100", 400.0, 30.0),
    ]);
    let get = |name: &str| scenario(&results, name);
    assert_eq!(get("neighbours-alone").against, None);
    assert_eq!(
        get("neighbours-slow-20").against.as_deref(),
        Some("neighbours-alone")
    );
    assert_eq!(get("neighbours-hang-100").throughput_ratio, Some(0.4));
    let met = |what: &str| {
        results
            .targets
            .iter()
            .find(|t| t.what == what)
            .and_then(|t| t.met)
    };
    assert_eq!(
        met("neighbours-slow-20: healthy throughput / alone"),
        Some(true)
    );
    assert_eq!(met("neighbours-slow-20: healthy p99 / alone"), Some(true));
    assert_eq!(
        met("neighbours-hang-100: healthy throughput / alone"),
        Some(false)
    );
    assert_eq!(met("neighbours-hang-100: healthy p99 / alone"), Some(false));
    assert_eq!(met("neighbours-alone: healthy throughput / alone"), None);
}

#[test]
fn a_neighbours_point_of_several_rounds_is_judged_by_its_median_and_shows_its_range() {
    let mut run = measured(1_000, 1.0, 1.0, 50.0, 1_000.0);
    run.deliveries_per_s = 500.0;
    let alone = ScenarioResult::of("neighbours-alone", String::new(), vec![run.clone()]);
    let mut point = ScenarioResult::of("neighbours-fail-1000", String::new(), vec![run]);
    for (note, value) in [
        ("thr_vs_alone", 0.95),
        ("thr_vs_alone_min", 0.5),
        ("thr_vs_alone_max", 1.0),
        ("p99_vs_alone", 1.4),
        ("p99_vs_alone_min", 1.1),
        ("p99_vs_alone_max", 2.5),
    ] {
        point.note(note, value);
    }
    let results = judged(vec![alone, point]);
    let target = |what: &str| {
        results
            .targets
            .iter()
            .find(|t| t.what == what)
            .cloned()
            .expect("the target")
    };
    let thr = target("neighbours-fail-1000: healthy throughput / alone");
    assert_eq!(
        (thr.value, thr.met, thr.range),
        (0.95, Some(true), Some([0.5, 1.0]))
    );
    let p99 = target("neighbours-fail-1000: healthy p99 / alone");
    assert_eq!(
        (p99.value, p99.met, p99.range),
        (1.4, Some(true), Some([1.1, 2.5]))
    );
    assert!(
        results
            .table()
            .lines()
            .any(|l| l.contains("fail-1000: healthy p99") && l.ends_with("(rounds 1.10-2.50)")),
        "{}",
        results.table()
    );
}

#[test]
fn a_quick_run_judges_no_target() {
    let results = results(true);
    assert!(!results.targets.is_empty());
    assert!(results.targets.iter().all(|t| t.met.is_none()));
    assert!(
        results
            .table()
            .contains("quick run: sizes too small to judge")
    );
}

#[test]
fn round_against_round_sets_each_round_against_its_baselines_same_round() {
    // 20,000 deliveries a round, (wall s, CPU s) each. The machine slowed in round 3 (both
    // sides half as fast), and the pipeline's first round was slow too. The medians set
    // 5,000/s against 10,000/s (0.5x), although two of the three rounds were even.
    let rounds = |name: &str, runs: &[(f64, f64)]| {
        let runs = runs
            .iter()
            .map(|&(wall_s, cpu_s)| measured(20_000, wall_s, cpu_s, 50.0, 10.0))
            .collect();
        ScenarioResult::of(name, name.to_owned(), runs)
    };
    let forwarder = rounds("forwarder", &[(2.0, 1.0), (2.0, 2.0), (4.0, 2.0)]);
    let pipeline = rounds("pipeline", &[(4.0, 1.5), (2.0, 2.2), (4.0, 3.0)]);
    let one_round = rounds("many", &[(4.0, 2.0)]);
    let results = judged(vec![forwarder, pipeline, one_round]);
    let get = |name: &str| scenario(&results, name);
    let pipeline = get("pipeline");
    let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
    assert!(close(pipeline.throughput_ratio, 0.5), "{pipeline:?}");
    // Rounds: 0.5x, 1.0x, 1.0x.
    assert!(close(pipeline.throughput_ratio_paired, 1.0), "{pipeline:?}");
    // CPU ms per 1,000: 75, 110, 150 against 50, 100, 100: medians 110 / 100; rounds 1.5x,
    // 1.1x, 1.5x.
    assert!(close(pipeline.cpu_ratio, 1.1), "{pipeline:?}");
    assert!(close(pipeline.cpu_ratio_paired, 1.5), "{pipeline:?}");
    // One round against three: nothing to pair.
    assert_eq!(get("many").throughput_ratio_paired, None);
    assert_eq!(get("many").cpu_ratio_paired, None);
    assert_eq!(
        met(&results, "pipeline / forwarder throughput"),
        Some(false)
    );
    assert_eq!(
        met(
            &results,
            "pipeline / forwarder throughput, round against round"
        ),
        Some(true)
    );
    assert_eq!(
        met(
            &results,
            "pipeline / forwarder CPU per delivery, round against round"
        ),
        Some(false)
    );
    let table = results.table();
    assert!(
        table.contains("round against round (the median of each round over its baseline's round): pipeline / forwarder thr 1.00x CPU 1.50x"),
        "{table}"
    );
}

#[test]
fn once_delivering_leaves_the_start_up_out_of_both() {
    // 20,000 deliveries: the forwarder spends 0.1 s of its 1.0 s before the first, the
    // pipeline 0.4 s of its 1.5 s; after the first, 5% more time for the pipeline.
    let run = |cpu_s: f64, before_first_s: f64, after_first_per_s: f64| {
        let mut m = measured(20_000, 2.0, cpu_s, 50.0, 10.0);
        m.cpu_ms_per_1k_after_first = (cpu_s - before_first_s) * 1e6 / 19_999.0;
        m.after_first_per_s = after_first_per_s;
        m
    };
    let forwarder = ScenarioResult::of("forwarder", String::new(), vec![run(1.0, 0.1, 20_000.0)]);
    let pipeline = ScenarioResult::of("pipeline", String::new(), vec![run(1.5, 0.4, 19_000.0)]);
    let results = judged(vec![forwarder, pipeline]);
    let pipeline = scenario(&results, "pipeline");
    let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
    assert!(close(pipeline.cpu_ratio, 1.5), "{pipeline:?}");
    assert!(
        close(pipeline.cpu_ratio_after_first, 1.1 / 0.9),
        "{pipeline:?}"
    );
    assert!(
        close(pipeline.throughput_ratio_after_first, 0.95),
        "{pipeline:?}"
    );
    assert_eq!(
        met(&results, "pipeline / forwarder CPU per delivery"),
        Some(false)
    );
    assert_eq!(
        met(
            &results,
            "pipeline / forwarder CPU per delivery, once delivering"
        ),
        Some(true)
    );
    assert_eq!(
        met(&results, "pipeline / forwarder throughput, once delivering"),
        Some(false)
    );
    let table = results.table();
    assert!(
        table.contains("once delivering (from the first delivery on, the start-up left out of both): pipeline 55.0 CPU ms/1k, pipeline / forwarder thr 0.95x CPU 1.22x"),
        "{table}"
    );
}

#[test]
fn the_scenario_tables_headers_stand_over_their_columns() {
    let table = results(false).table();
    let cells = crate::text_table::aligned_cells(&table, "scenario ", "pipeline ");
    let under = |header: &str| {
        cells
            .iter()
            .find(|(h, _)| h == header)
            .map(|(_, cell)| cell.as_str())
    };
    assert_eq!(cells.len(), 12);
    assert_eq!(under("scenario"), Some("pipeline"));
    assert_eq!(under("deliveries"), Some("20000"));
    assert_eq!(under("deliveries/s"), Some("5000"));
    assert_eq!(under("broker ms/1k"), Some("10.0"));
    assert_eq!(under("vs"), Some("forwarder"));
    assert_eq!(under("CPU x"), Some("2.00"));
    crate::text_table::aligned_cells(&table, "scenario ", "ceiling ");
}
