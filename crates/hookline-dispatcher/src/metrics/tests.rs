use super::*;

fn sample<'a>(exposition: &'a str, series: &str) -> Option<&'a str> {
    exposition
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
}

fn open_now(metrics: &Metrics) -> Option<String> {
    sample(&metrics.encode(), "webhook_circuits_open").map(str::to_owned)
}

#[test]
fn circuits_open_counts_endpoints_whose_breaker_is_not_closed() {
    let metrics = Metrics::new();
    assert_eq!(open_now(&metrics).as_deref(), Some("0"));
    metrics.breaker_changed("ep-a", BreakerState::Open);
    metrics.breaker_changed("ep-b", BreakerState::Open);
    assert_eq!(open_now(&metrics).as_deref(), Some("2"));
    // Probing is not closed yet; a probe that fails opens it again: still one each.
    metrics.breaker_changed("ep-a", BreakerState::HalfOpen);
    metrics.breaker_changed("ep-a", BreakerState::Open);
    assert_eq!(open_now(&metrics).as_deref(), Some("2"));
    metrics.breaker_changed("ep-a", BreakerState::HalfOpen);
    metrics.breaker_changed("ep-a", BreakerState::Closed);
    assert_eq!(open_now(&metrics).as_deref(), Some("1"));
}

fn open_series(metrics: &Metrics) -> Vec<String> {
    metrics
        .encode()
        .lines()
        .filter(|line| line.starts_with("webhook_circuit_open{"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn circuit_open_names_each_endpoint_whose_breaker_is_not_closed() {
    let metrics = Metrics::new();
    assert!(open_series(&metrics).is_empty());
    metrics.breaker_changed("ep-a", BreakerState::Open);
    metrics.breaker_changed("ep-b", BreakerState::Open);
    metrics.breaker_changed("ep-b", BreakerState::HalfOpen);
    let mut series = open_series(&metrics);
    series.sort();
    assert_eq!(
        series,
        [
            r#"webhook_circuit_open{endpoint="ep-a",state="open"} 1"#,
            r#"webhook_circuit_open{endpoint="ep-b",state="half_open"} 1"#,
        ]
    );
    metrics.breaker_changed("ep-a", BreakerState::Closed);
    metrics.breaker_changed("ep-b", BreakerState::Closed);
    assert!(open_series(&metrics).is_empty(), "{}", metrics.encode());
    assert_eq!(open_now(&metrics).as_deref(), Some("0"));
}

#[test]
fn circuit_open_names_at_most_max_circuit_series_endpoints() {
    let metrics = Metrics::new();
    for n in 0..MAX_CIRCUIT_SERIES + 10 {
        metrics.breaker_changed(&format!("ep-{n:04}"), BreakerState::Open);
    }
    assert_eq!(open_series(&metrics).len(), MAX_CIRCUIT_SERIES);
    let total = MAX_CIRCUIT_SERIES + 10;
    assert_eq!(open_now(&metrics), Some(total.to_string()));
    // One closes: an unlabelled one may take its place once it changes again.
    metrics.breaker_changed("ep-0000", BreakerState::Closed);
    metrics.breaker_changed(
        &format!("ep-{:04}", MAX_CIRCUIT_SERIES + 3),
        BreakerState::HalfOpen,
    );
    assert_eq!(open_series(&metrics).len(), MAX_CIRCUIT_SERIES);
    assert!(
        open_series(&metrics)
            .iter()
            .any(|line| line.contains(&format!("ep-{:04}", MAX_CIRCUIT_SERIES + 3))),
    );
}

#[test]
fn labelled_families_are_exported_once_used() {
    let metrics = Metrics::new();
    metrics.breaker_changed("ep-a", BreakerState::Open);
    metrics.consumer_error("BrokerTransportFailure".to_owned());
    metrics.deferred("5s", "rate_limited");
    metrics.set_paused("not_due", 1);
    metrics.set_slow_budget(3, 2);
    let exposition = metrics.encode();
    for family in [
        "webhook_circuit_transitions counter",
        "webhook_consumer_errors counter",
        "webhook_deferrals counter",
        "webhook_paused_partitions gauge",
        "webhook_slow_budget gauge",
    ] {
        assert!(
            exposition.contains(&format!("# TYPE {family}\n")),
            "{family}: {exposition}"
        );
    }
}

#[test]
fn a_deferral_to_the_lane_is_not_a_scheduled_retry() {
    let metrics = Metrics::new();
    metrics.deferred(LANE, "endpoint_slow");
    metrics.deferred("5s", "circuit_open");
    let exposition = metrics.encode();
    let lane = r#"webhook_deferrals_total{tier="lane",why="endpoint_slow"}"#;
    assert_eq!(sample(&exposition, lane), Some("1"), "{exposition}");
    assert_eq!(
        metrics.totals().retries_by_tier.keys().collect::<Vec<_>>(),
        ["5s"],
        "the lane is no retry tier"
    );
}

#[test]
fn every_deliverys_series_count_under_their_own_labels_from_zero() {
    let metrics = Metrics::new();
    let exposition = metrics.encode();
    for state in DeliveryState::ALL {
        let series = format!(
            "webhook_state_transitions_total{{state=\"{}\"}}",
            state.as_str()
        );
        assert_eq!(sample(&exposition, &series), Some("0"), "{exposition}");
    }
    for (n, state) in DeliveryState::ALL.into_iter().enumerate() {
        for _ in 0..=n {
            metrics.transition(state);
        }
    }
    metrics.attempt(&Classification::Success, Duration::from_millis(3));
    metrics.attempt(
        &Classification::Retryable {
            reason: hookline_core::FailureKind::Timeout,
            retry_after: None,
        },
        Duration::from_millis(3),
    );
    metrics.delivered();
    let exposition = metrics.encode();
    for (n, state) in DeliveryState::ALL.into_iter().enumerate() {
        let series = format!(
            "webhook_state_transitions_total{{state=\"{}\"}}",
            state.as_str()
        );
        let count = (n + 1).to_string();
        assert_eq!(
            sample(&exposition, &series),
            Some(count.as_str()),
            "{series}"
        );
    }
    for (series, count) in [
        (r#"webhook_attempts_total{outcome="success"}"#, "1"),
        (r#"webhook_attempts_total{outcome="timeout"}"#, "1"),
        (r#"webhook_delivery_total{status="succeeded"}"#, "1"),
    ] {
        assert_eq!(sample(&exposition, series), Some(count), "{exposition}");
    }
    assert_eq!(metrics.totals().succeeded, 1);
}
