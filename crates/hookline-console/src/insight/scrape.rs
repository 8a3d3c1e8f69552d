//! The dispatchers' `/metrics`: scraping each (bounded in time and size) and reading the
//! circuit breaker gauges out of the Prometheus text exposition.
//!
//! The parser is hookline's own, of just the sample lines: the `prometheus-parse` crate
//! splits label sets on `,` and `=` and does not unescape values, so an endpoint id holding
//! either (or a quote) would be misread; this one follows the exposition format's quoting.

use std::collections::BTreeMap;

use hookline_core::url_guard::redact_url;
use serde::Serialize;
use url::Url;

/// The gauge that names each endpoint whose breaker is open or half-open.
pub const CIRCUIT_OPEN_METRIC: &str = "webhook_circuit_open";
/// The gauge that counts them.
pub const CIRCUITS_OPEN_METRIC: &str = "webhook_circuits_open";
/// The largest `/metrics` body read, in bytes.
pub const MAX_METRICS_BYTES: usize = 8 << 20;

/// One sample line: `name{label="value",...} value [timestamp]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The metric name.
    pub name: String,
    /// The labels, unescaped, in their order.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

impl Sample {
    /// The value of label `name`.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(label, _)| label == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The samples of a text exposition (Prometheus 0.0.4 or OpenMetrics); comments and lines
/// that are not well-formed samples are skipped, never a panic.
pub fn parse_exposition(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim_start();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let (name, mut rest) = line.split_at(name_end);
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, tail) = parse_labels(after)?;
        labels = parsed;
        rest = tail;
    }
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        other => other.parse().ok()?,
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// Labels after the `{`, up to and past the `}`: the labels and what follows.
fn parse_labels(mut rest: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(tail) = rest.strip_prefix('}') {
            return Some((labels, tail));
        }
        let eq = rest.find('=')?;
        let name = rest[..eq].trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        rest = rest[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next()? {
                (at, '"') => break at,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((name.to_owned(), value));
        rest = rest[end + 1..].trim_start();
        if let Some(tail) = rest.strip_prefix(',') {
            rest = tail;
        } else if !rest.starts_with('}') {
            return None;
        }
    }
}

/// A breaker that is not closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CircuitState {
    /// Open: the endpoint's records go to a tier without an attempt.
    Open,
    /// Half-open: a few probes are let through.
    HalfOpen,
}

/// What one dispatcher's `/metrics` says about circuits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CircuitGauges {
    /// The endpoints it names, with their state.
    pub endpoints: BTreeMap<String, CircuitState>,
    /// `webhook_circuits_open`: how many it counts (it names at most 256).
    pub open: u64,
}

/// The circuit gauges out of a dispatcher's samples.
pub fn circuit_gauges(samples: &[Sample]) -> CircuitGauges {
    let mut gauges = CircuitGauges::default();
    for sample in samples {
        if sample.name == CIRCUITS_OPEN_METRIC && sample.value.is_finite() {
            // A float count: `as` saturates, and the value is finite and not below 0.
            gauges.open = sample.value.max(0.0) as u64;
        }
        if sample.name != CIRCUIT_OPEN_METRIC || sample.value < 1.0 {
            continue;
        }
        let state = match sample.label("state") {
            Some("open") => CircuitState::Open,
            Some("half_open") => CircuitState::HalfOpen,
            _ => continue,
        };
        if let Some(endpoint) = sample.label("endpoint") {
            gauges.endpoints.insert(endpoint.to_owned(), state);
        }
    }
    gauges
}

/// How one dispatcher's scrape went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ScrapeStatus {
    /// Its `/metrics` URL, redacted (no user info, no query).
    pub url: String,
    /// Why it could not be read; `None` when it was.
    pub error: Option<String>,
}

/// Scrapes `url`: its circuit gauges, or why not (a status, a timeout, a body too large).
pub async fn scrape(client: &reqwest::Client, url: &Url) -> (ScrapeStatus, Option<CircuitGauges>) {
    let shown = redact_url(url.as_str());
    match fetch(client, url).await {
        Ok(body) => (
            ScrapeStatus {
                url: shown,
                error: None,
            },
            Some(circuit_gauges(&parse_exposition(&body))),
        ),
        Err(error) => {
            tracing::warn!(url = %shown, %error, "a dispatcher's metrics could not be read");
            (
                ScrapeStatus {
                    url: shown,
                    error: Some(error),
                },
                None,
            )
        }
    }
}

async fn fetch(client: &reqwest::Client, url: &Url) -> Result<String, String> {
    // reqwest's error text names the URL; only the kind of failure is kept.
    let describe = |error: reqwest::Error| {
        if error.is_timeout() {
            "timed out".to_owned()
        } else if error.is_connect() {
            "could not connect".to_owned()
        } else {
            "the request failed".to_owned()
        }
    };
    let mut response = client.get(url.clone()).send().await.map_err(describe)?;
    if !response.status().is_success() {
        return Err(format!("answered HTTP {}", response.status().as_u16()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(describe)? {
        if body.len() + chunk.len() > MAX_METRICS_BYTES {
            return Err(format!("the body is over {MAX_METRICS_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_and_without_labels() {
        let text = "# HELP webhook_circuits_open Endpoints...\n\
                    # TYPE webhook_circuits_open gauge\n\
                    webhook_circuits_open 2\n\
                    webhook_delivery_total{status=\"succeeded\"} 17 1700000000000\n\
                    webhook_delivery_latency_seconds_bucket{le=\"+Inf\"} 3\n\
                    # EOF\n";
        let samples = parse_exposition(text);
        assert_eq!(samples.len(), 3);
        assert_eq!(samples[0].name, "webhook_circuits_open");
        assert!(samples[0].labels.is_empty());
        assert_eq!(samples[0].value, 2.0);
        assert_eq!(samples[1].label("status"), Some("succeeded"));
        assert_eq!(samples[1].value, 17.0);
        assert_eq!(samples[2].label("le"), Some("+Inf"));
    }

    #[test]
    fn label_values_are_unescaped_whatever_they_hold() {
        let line = r#"webhook_circuit_open{endpoint="a,b=c \"q\" \\ \n}",state="open"} 1"#;
        let samples = parse_exposition(line);
        assert_eq!(samples.len(), 1, "{samples:?}");
        assert_eq!(samples[0].label("endpoint"), Some("a,b=c \"q\" \\ \n}"));
        assert_eq!(samples[0].label("state"), Some("open"));
    }

    #[test]
    fn what_is_not_a_sample_is_skipped() {
        for line in [
            "",
            "   ",
            "# TYPE x gauge",
            "{a=\"b\"} 1",
            "9metric 1",
            "metric",
            "metric{a=\"b\" 1",
            "metric{a=\"b} 1",
            "metric{a=b} 1",
            "metric{=\"b\"} 1",
            "metric{a=\"b\"}1",
            "metric notanumber",
            "metric{a=\"\\",
            "métric 1",
        ] {
            assert_eq!(parse_exposition(line), [], "{line:?}");
        }
        let special = parse_exposition("a +Inf\nb -Inf\nc NaN\nd 1e3\ne{} 4");
        assert_eq!(special.len(), 5);
        assert_eq!(special[0].value, f64::INFINITY);
        assert!(special[2].value.is_nan());
        assert_eq!(special[3].value, 1000.0);
        assert_eq!(special[4].name, "e");
    }

    #[test]
    fn circuit_gauges_name_the_open_and_half_open_endpoints() {
        let text = "webhook_circuits_open 3\n\
                    webhook_circuit_open{endpoint=\"ep-a\",state=\"open\"} 1\n\
                    webhook_circuit_open{endpoint=\"ep-b\",state=\"half_open\"} 1\n\
                    webhook_circuit_open{endpoint=\"ep-c\",state=\"open\"} 0\n\
                    webhook_circuit_open{endpoint=\"ep-d\",state=\"sideways\"} 1\n\
                    webhook_circuit_transitions_total{state=\"open\"} 9\n";
        let gauges = circuit_gauges(&parse_exposition(text));
        assert_eq!(gauges.open, 3);
        assert_eq!(
            gauges.endpoints.into_iter().collect::<Vec<_>>(),
            [
                ("ep-a".to_owned(), CircuitState::Open),
                ("ep-b".to_owned(), CircuitState::HalfOpen)
            ]
        );
    }

    #[test]
    fn the_dispatchers_own_exposition_parses() {
        // What prometheus-client writes for a label value with quotes and a backslash.
        let mut registry = prometheus_client::registry::Registry::default();
        #[derive(
            Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet,
        )]
        struct Label {
            endpoint: String,
            state: &'static str,
        }
        let family = prometheus_client::metrics::family::Family::<
            Label,
            prometheus_client::metrics::gauge::Gauge,
        >::default();
        registry.register(CIRCUIT_OPEN_METRIC, "help", family.clone());
        family
            .get_or_create(&Label {
                endpoint: r#"we"ird\id,x=y"#.into(),
                state: "open",
            })
            .set(1);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        let gauges = circuit_gauges(&parse_exposition(&text));
        assert_eq!(
            gauges.endpoints.get(r#"we"ird\id,x=y"#),
            Some(&CircuitState::Open),
            "{text}"
        );
    }
}
