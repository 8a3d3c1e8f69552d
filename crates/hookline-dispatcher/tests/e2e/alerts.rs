//! The shipped alert rules and dashboard against a real Prometheus: Debian's `prometheus`
//! binary, started here on a free loopback port with a data dir of its own, scrapes a real
//! dispatcher's admin port every second and evaluates `deploy/prometheus/hookline-rules.yml`
//! every second. An endpoint that answers 500 parks its deliveries; the DLQ alert and the
//! fast burn-rate page must reach `firing` through Prometheus's HTTP API, and stopping the
//! dispatcher must fire the dispatcher-down alert. Every metric the rules and the dashboard
//! name must be one the dispatcher exports, and every dashboard query must run.

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hookline_testkit::{Reply, wait_until};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::harness::{Harness, event};

/// Families with labels that a dispatcher exports only from their first event on, and that
/// this test's traffic does not cause (no breaker, no consumer error, no full buffer). The
/// unit test `metrics::tests::labelled_families_are_exported_once_used` and the attempt
/// log's e2e test (`webhook_attempt_log_dropped_total`) show them exported.
const FIRST_EVENT_FAMILIES: [&str; 5] = [
    "webhook_circuit_transitions_total",
    "webhook_consumer_errors_total",
    "webhook_deferrals_total",
    "webhook_paused_partitions",
    "webhook_attempt_log_dropped_total",
];

/// How long an alert may take to fire: windows need a few scrapes, `for:` one evaluation.
const FIRING_DEADLINE: Duration = Duration::from_secs(120);

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// The shipped rules with every `for:` cut to one second, so that the test need not wait
/// minutes. It is derived from the shipped file line by line, and nothing else changes: the
/// expressions evaluated are the shipped ones. Also the number of `for:` lines changed.
fn rules_with_short_for(shipped: &str) -> (String, usize) {
    let mut changed = 0;
    let mut out = String::new();
    for line in shipped.lines() {
        let body = line.trim_start();
        if let Some(rest) = body.strip_prefix("for: ")
            && is_duration(rest.trim())
        {
            let indent = &line[..line.len() - body.len()];
            out.push_str(&format!("{indent}for: 1s\n"));
            changed += 1;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    (out, changed)
}

/// Whether `value` is a Prometheus duration such as `15m` (a `for:` value, not a label's).
fn is_duration(value: &str) -> bool {
    let digits = value.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    !digits.is_empty()
        && digits.len() < value.len()
        && digits.chars().all(|c| c.is_ascii_digit())
        && ["ms", "s", "m", "h", "d", "w", "y"].contains(&&value[digits.len()..])
}

/// A Prometheus server of this test's own, stopped (and its data dir removed) on drop.
struct Prometheus {
    child: Child,
    /// Dropped after the child is stopped, removing the data dir.
    dir: tempfile::TempDir,
    url: String,
    http: reqwest::Client,
}

impl Prometheus {
    /// Starts `prometheus` (or `HOOKLINE_PROMETHEUS`) scraping `target` with `rules`.
    async fn start(target: SocketAddr, rules: &str) -> Prometheus {
        let dir = tempfile::tempdir().expect("a temp dir");
        std::fs::create_dir_all(dir.path().join("data")).expect("a data dir");
        std::fs::write(dir.path().join("rules.yml"), rules).expect("rules written");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - rules.yml\n\
             scrape_configs:\n  - job_name: hookline\n    static_configs:\n      - targets: [\"{target}\"]\n"
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).expect("config written");
        let port = free_port();
        let binary = std::env::var("HOOKLINE_PROMETHEUS").unwrap_or_else(|_| "prometheus".into());
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("a log file");
        let spawned = Command::new(&binary)
            .arg(format!(
                "--config.file={}",
                dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => panic!(
                "`{binary}` was not found: this test needs a Prometheus server binary \
                 (deploy/setup installs Debian's `prometheus` package; or set HOOKLINE_PROMETHEUS)"
            ),
            Err(error) => panic!("could not start `{binary}`: {error}"),
        };
        let prometheus = Prometheus {
            child,
            dir,
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        };
        let ready = format!("{}/-/ready", prometheus.url);
        wait_until(FIRING_DEADLINE, "Prometheus ready", || async {
            let answer = prometheus.http.get(&ready).send().await.ok()?;
            answer.status().is_success().then_some(())
        })
        .await;
        prometheus
    }

    /// What Prometheus' log says, for failure messages.
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    async fn api(&self, path: &str, query: &[(&str, &str)]) -> Option<Value> {
        let url = reqwest::Url::parse_with_params(&format!("{}{path}", self.url), query).ok()?;
        let answer = self.http.get(url).send().await.ok()?;
        answer.json().await.ok()
    }

    /// The alerts Prometheus holds now: (name, state, labels).
    async fn alerts(&self) -> Vec<(String, String, Value)> {
        let Some(body) = self.api("/api/v1/alerts", &[]).await else {
            return Vec::new();
        };
        body["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|alert| {
                (
                    alert["labels"]["alertname"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                    alert["state"].as_str().unwrap_or("").to_owned(),
                    alert.clone(),
                )
            })
            .collect()
    }

    /// Waits until the alert `name` with `labels` is firing; returns it as the API has it.
    async fn wait_firing(&self, name: &str, labels: &[(&str, &str)]) -> Value {
        wait_until(
            FIRING_DEADLINE,
            &format!("{name} {labels:?} firing"),
            || async {
                self.alerts()
                    .await
                    .into_iter()
                    .find(|(alert, state, value)| {
                        alert == name
                            && state == "firing"
                            && labels
                                .iter()
                                .all(|(label, want)| value["labels"][label] == *want)
                    })
                    .map(|(_, _, alert)| alert)
            },
        )
        .await
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// The metric names a PromQL expression uses: `webhook_*` series and `hookline:*` records.
fn names_in(expr: &str) -> BTreeSet<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|token| token.starts_with("webhook_") || token.starts_with("hookline:"))
        .map(str::to_owned)
        .collect()
}

/// The sample names a Prometheus scrape of `exposition` can return, from its `# TYPE`
/// lines (registered families show there before their first sample).
fn exported(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        let mut words = line.split_whitespace();
        if (words.next(), words.next()) != (Some("#"), Some("TYPE")) {
            continue;
        }
        let (Some(name), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        for suffix in suffixes {
            names.insert(format!("{name}{suffix}"));
        }
    }
    names
}

/// The `expr` of every alert and record of a rules file, and the records it defines.
fn rule_exprs(rules: &str) -> (Vec<String>, BTreeSet<String>) {
    let mut exprs = Vec::new();
    let mut records = BTreeSet::new();
    // The expression being read from a block (`expr: |`), and the indent of its key.
    let mut current: Option<(String, usize)> = None;
    for line in rules.lines() {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        if let Some((expr, key_indent)) = current.as_mut() {
            if !body.is_empty() && indent > *key_indent {
                expr.push_str(body);
                expr.push('\n');
                continue;
            }
            exprs.extend(current.take().map(|(expr, _)| expr));
        }
        if let Some(name) = body.strip_prefix("- record: ") {
            records.insert(name.trim().to_owned());
        } else if let Some(expr) = body.strip_prefix("expr: ") {
            let expr = expr.trim();
            if expr == "|" {
                current = Some((String::new(), indent));
            } else {
                exprs.push(expr.to_owned());
            }
        }
    }
    exprs.extend(current.map(|(expr, _)| expr));
    (exprs, records)
}

/// The `expr` of every target of the dashboard.
fn dashboard_exprs(dashboard: &Value) -> Vec<String> {
    let mut exprs = Vec::new();
    let mut panels: Vec<&Value> = dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    while let Some(panel) = panels.pop() {
        panels.extend(panel["panels"].as_array().into_iter().flatten());
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                exprs.push(expr.to_owned());
            }
        }
    }
    exprs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_endpoint_fires_the_dlq_and_fast_burn_alerts_in_a_real_prometheus() {
    let shipped = std::fs::read_to_string(repo_file("deploy/prometheus/hookline-rules.yml"))
        .expect("the shipped rules");
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_file("deploy/grafana/hookline-dashboard.json"))
            .expect("the shipped dashboard"),
    )
    .expect("the dashboard is JSON");
    let (rules, shortened) = rules_with_short_for(&shipped);
    assert!(
        shortened >= 10,
        "expected the shipped alerts' for: lines, found {shortened}"
    );

    let mut h = Harness::new("alerts").await;
    let broken = h.receiver.script("broken", |_| Reply::Status(500));
    let gone = h.receiver.script("gone", |_| Reply::Status(410));
    let healthy = h.receiver.script("healthy", |_| Reply::Status(204));
    h.put_endpoint("ep-broken", serde_json::json!({ "url": broken }))
        .await;
    h.put_endpoint("ep-healthy", serde_json::json!({ "url": healthy }))
        .await;
    h.put_endpoint("ep-gone", serde_json::json!({ "url": gone }))
        .await;
    let mut config = h.config();
    config.retry.max_attempts = 2;
    // No breaker: an open circuit would defer the broken endpoint's records instead of
    // parking them (the circuits alert has its promtool tests).
    config.breaker.minimum_requests = 0;
    h.start(config).await;
    let admin = h
        .running
        .as_ref()
        .and_then(|running| running.admin_addr())
        .expect("the admin port listens");

    let (exprs, records) = rule_exprs(&shipped);
    assert!(exprs.len() >= 20, "rule expressions read: {exprs:?}");
    let queries = dashboard_exprs(&dashboard);
    assert!(queries.len() >= 20, "dashboard queries read: {queries:?}");

    let prometheus = Prometheus::start(admin, &rules).await;
    wait_until(FIRING_DEADLINE, "the dispatcher scraped", || async {
        let body = prometheus
            .api("/api/v1/query", &[("query", "up{job=\"hookline\"} == 1")])
            .await?;
        (!body["data"]["result"].as_array()?.is_empty()).then_some(())
    })
    .await;

    // One event to the endpoint that is gone (it is disabled at once), then a steady stream
    // to the other two until the alerts have fired (bounded in count).
    h.publish_json(&event("ep-gone", 0)).await;
    let stop = CancellationToken::new();
    let publisher = {
        let (stop, producer, topic) = (stop.clone(), h.producer.clone(), h.topics.events.clone());
        tokio::spawn(async move {
            for n in 0..600 {
                for endpoint in ["ep-broken", "ep-healthy"] {
                    let event = event(endpoint, n);
                    let value = event.to_json();
                    let record = rdkafka::producer::FutureRecord::to(&topic)
                        .key(endpoint)
                        .payload(&value);
                    let _ = producer.send(record, Duration::from_secs(10)).await;
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
        })
    };

    let dlq = prometheus
        .wait_firing("HooklineDLQInflow", &[("reason", "retries_exhausted")])
        .await;
    assert_eq!(dlq["labels"]["job"], "hookline", "{dlq}");
    assert_eq!(dlq["labels"]["severity"], "warning", "{dlq}");
    let burn = prometheus
        .wait_firing("HooklineErrorBudgetBurn1h", &[("job", "hookline")])
        .await;
    assert_eq!(burn["labels"]["severity"], "critical", "{burn}");
    assert_eq!(burn["labels"]["long_window"], "1h", "{burn}");
    let summary = burn["annotations"]["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("14.4 times"), "{burn}");
    assert!(
        !burn["annotations"]["runbook"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{burn}"
    );
    // Half of the finished deliveries were parked: the recorded ratio says so.
    let ratio = prometheus
        .api(
            "/api/v1/query",
            &[(
                "query",
                "hookline:delivery_errors:ratio_rate5m{job=\"hookline\"}",
            )],
        )
        .await
        .expect("a ratio");
    let ratio: f64 = ratio["data"]["result"][0]["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("a recorded ratio");
    assert!((0.3..=0.7).contains(&ratio), "error ratio {ratio}");
    let disabled = prometheus
        .wait_firing("HooklineEndpointsDisabled", &[("job", "hookline")])
        .await;
    assert_eq!(disabled["value"], "1e+00", "{disabled}");
    stop.cancel();
    publisher.await.expect("the publisher ends");

    // Every metric the rules and the dashboard use is one the dispatcher exports (seen on
    // its /metrics after the traffic, or one of the families named above), or a record of
    // the rules file.
    let exposition = reqwest::get(format!("http://{admin}/metrics"))
        .await
        .expect("/metrics answers")
        .text()
        .await
        .expect("/metrics text");
    let exported = exported(&exposition);
    for expr in exprs.iter().chain(&queries) {
        for name in names_in(expr) {
            assert!(
                exported.contains(&name)
                    || records.contains(&name)
                    || FIRST_EVENT_FAMILIES.contains(&name.as_str()),
                "`{name}` (in `{expr}`) is neither exported by the dispatcher nor recorded \
                 by the rules; exported: {exported:?}"
            );
        }
    }
    for name in FIRST_EVENT_FAMILIES {
        assert!(
            exprs
                .iter()
                .chain(&queries)
                .any(|expr| names_in(expr).contains(name)),
            "{name} is used by no rule or panel: take it off the list"
        );
    }

    // Every dashboard query runs in this Prometheus, with Grafana's variables filled in.
    for query in &queries {
        let query = query
            .replace("$__rate_interval", "1m")
            .replace("$job", ".+");
        let body = prometheus
            .api("/api/v1/query", &[("query", &query)])
            .await
            .expect("an answer");
        assert_eq!(body["status"], "success", "`{query}`: {body}");
    }

    // The dispatcher is not down while it runs; it is once it stops.
    let down_before = prometheus.alerts().await;
    assert!(
        !down_before
            .iter()
            .any(|(name, _, _)| name == "HooklineDispatcherDown"),
        "{down_before:?}"
    );
    h.stop().await;
    let down = prometheus
        .wait_firing(
            "HooklineDispatcherDown",
            &[("instance", &admin.to_string())],
        )
        .await;
    assert_eq!(down["labels"]["severity"], "warning", "{down}");
    assert!(
        prometheus
            .log()
            .lines()
            .all(|line| !line.contains("level=error")),
        "{}",
        prometheus.log()
    );
}

#[test]
fn shortening_for_changes_only_the_for_durations() {
    let shipped = "      - alert: A\n        expr: |\n          x > 0\n        for: 15m\n        labels:\n          for: team-a\n";
    let (derived, changed) = rules_with_short_for(shipped);
    assert_eq!(changed, 1);
    assert_eq!(
        derived,
        "      - alert: A\n        expr: |\n          x > 0\n        for: 1s\n        labels:\n          for: team-a\n"
    );
    let (exprs, _) = rule_exprs(shipped);
    assert_eq!(exprs, ["x > 0\n"]);
}
