//! The figures of a scenario, computed from what was published, what the receivers saw and
//! what the DLQ holds: pure functions, unit-tested.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::dlq::Parked;
use crate::load::{Expect, Published};
use crate::receiver::{Answer, Request};

/// Nearest-rank percentiles of a sample, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Percentiles {
    /// How many values.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Percentiles {
    /// The percentiles of `values`; `None` when there are none.
    pub fn of(mut values: Vec<f64>) -> Option<Percentiles> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let rank =
            |p: f64| values[((p * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
        Some(Percentiles {
            count: values.len(),
            p50: rank(0.50),
            p99: rank(0.99),
            max: values[values.len() - 1],
        })
    }
}

/// The longest stretch with something outstanding and nothing finished.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Stall {
    /// Its length, in seconds.
    pub seconds: f64,
    /// When it began, on the scenario's clock.
    pub from: f64,
}

/// How long one event was outstanding: from its publication to its delivery or parking
/// (`None`: never).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    /// Published.
    pub start: f64,
    /// Finished.
    pub end: Option<f64>,
}

/// The longest interval within `window` during which at least one event was outstanding and
/// no outstanding event finished (duplicates of finished ones do not count as progress).
/// An event still outstanding at the end stalls until the window's end.
pub fn longest_stall(spans: &[Span], window: (f64, f64)) -> Stall {
    let mut points: Vec<(f64, bool)> = Vec::with_capacity(spans.len() * 2);
    for span in spans {
        points.push((span.start, false));
        if let Some(end) = span.end {
            points.push((end.max(span.start), true));
        }
    }
    // At one instant, publishing first: an event may be delivered before its publisher
    // hears back from Kafka, so its finish is moved to its publication, and must follow it.
    points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut best = Stall::default();
    let mut consider = |from: f64, to: f64| {
        let (from, to) = (from.max(window.0), to.min(window.1));
        if to - from > best.seconds {
            best = Stall {
                seconds: to - from,
                from,
            };
        }
    };
    let (mut outstanding, mut since) = (0usize, 0.0);
    for (at, finished) in points {
        if finished {
            if outstanding > 0 {
                consider(since, at);
                outstanding -= 1;
            }
            since = at;
        } else {
            if outstanding == 0 {
                since = at;
            }
            outstanding += 1;
        }
    }
    if outstanding > 0 {
        consider(since, window.1);
    }
    best
}

/// Retry lateness: each attempt `n` ≥ 2 arrived this long after the answer to attempt
/// `n - 1` plus the backoff (the latest earlier request of that id and attempt).
pub fn lateness<'a>(requests: impl IntoIterator<Item = &'a Request>, backoff_s: f64) -> Vec<f64> {
    let mut by_id: HashMap<&str, Vec<&Request>> = HashMap::new();
    for request in requests {
        by_id.entry(request.id.as_str()).or_default().push(request);
    }
    let mut out = Vec::new();
    for attempts in by_id.values() {
        for request in attempts.iter().filter(|r| r.attempt >= 2) {
            let previous = attempts
                .iter()
                .filter(|p| p.attempt == request.attempt - 1 && p.at < request.at)
                .max_by(|a, b| a.at.total_cmp(&b.at));
            if let Some(previous) = previous {
                out.push(request.at - (previous.answered_at + backoff_s));
            }
        }
    }
    out
}

/// What became of the published records.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Figures {
    /// Records published.
    pub published: usize,
    /// Distinct published ids answered 2xx.
    pub delivered: usize,
    /// Published records found in the DLQ (and not delivered).
    pub parked: usize,
    /// DLQ envelopes by reason (all of them).
    pub parked_by_reason: BTreeMap<String, usize>,
    /// Published records neither delivered nor parked.
    pub lost: usize,
    /// Some of the lost ids.
    pub lost_ids: Vec<String>,
    /// Records whose outcome is not the expected one (a good event parked, a poison
    /// record delivered or parked for another reason).
    pub unexpected: usize,
    /// Some of them, with what happened.
    pub unexpected_examples: Vec<String>,
    /// Ids answered 2xx more than once.
    pub duplicates: usize,
    /// 2xx answers beyond the first, over all ids.
    pub duplicate_deliveries: usize,
    /// Requests whose signature did not verify.
    pub bad_signatures: usize,
    /// Requests for ids nobody published.
    pub unknown_requests: usize,
    /// Requests received.
    pub requests: usize,
    /// The longest stall of the healthy endpoints' events.
    pub longest_stall: Stall,
    /// From publication to delivery or parking, over every finished record.
    pub latency: Option<Percentiles>,
    /// Retry lateness of the endpoints that count for it.
    pub lateness: Option<Percentiles>,
}

/// What counts where.
pub struct Scope<'a> {
    /// Endpoints whose events count in the longest stall.
    pub healthy: &'a HashSet<String>,
    /// Endpoints whose retries count in the lateness.
    pub lateness: &'a HashSet<String>,
    /// The fixed backoff, in seconds.
    pub backoff_s: f64,
    /// The end of observation.
    pub end: f64,
}

/// When each published record finished (first 2xx, else parked), by id.
pub fn finish_times(
    published: &[Published],
    requests: &[Request],
    parked: &[Parked],
) -> HashMap<String, f64> {
    let mut finished: HashMap<String, f64> = HashMap::new();
    for request in requests.iter().filter(|r| r.answer.is_success()) {
        finished
            .entry(request.id.clone())
            .and_modify(|at| *at = at.min(request.at))
            .or_insert(request.at);
    }
    for (id, envelope) in match_parked(published, parked) {
        finished.entry(id.to_owned()).or_insert(envelope.at);
    }
    finished
}

/// Each published record found in the DLQ, by id: by its own key when it has one, else by
/// event id.
fn match_parked<'a>(
    published: &'a [Published],
    parked: &'a [Parked],
) -> HashMap<&'a str, &'a Parked> {
    let by_id: HashMap<&str, &Parked> = parked.iter().map(|p| (p.event_id.as_str(), p)).collect();
    let by_key: HashMap<&str, &Parked> = parked
        .iter()
        .filter_map(|p| Some((p.key.as_deref()?, p)))
        .collect();
    published
        .iter()
        .filter_map(|record| {
            let envelope = match &record.key {
                Some(key) => by_key.get(key.as_str()),
                None => by_id.get(record.id.as_str()),
            }?;
            Some((record.id.as_str(), *envelope))
        })
        .collect()
}

/// The scenario's figures.
pub fn figures(
    published: &[Published],
    requests: &[Request],
    parked: &[Parked],
    scope: &Scope<'_>,
) -> Figures {
    let mut successes: HashMap<&str, usize> = HashMap::new();
    for request in requests.iter().filter(|r| r.answer.is_success()) {
        *successes.entry(request.id.as_str()).or_default() += 1;
    }
    let parked_of = match_parked(published, parked);
    let finished = finish_times(published, requests, parked);
    let ids: HashSet<&str> = published.iter().map(|p| p.id.as_str()).collect();

    let mut figures = Figures {
        published: published.len(),
        requests: requests.len(),
        bad_signatures: requests.iter().filter(|r| !r.signature_ok).count(),
        unknown_requests: requests
            .iter()
            .filter(|r| !ids.contains(r.id.as_str()))
            .count(),
        duplicates: successes.values().filter(|n| **n > 1).count(),
        duplicate_deliveries: successes.values().map(|n| n.saturating_sub(1)).sum(),
        ..Figures::default()
    };
    for envelope in parked {
        *figures
            .parked_by_reason
            .entry(envelope.reason.code().to_owned())
            .or_default() += 1;
    }
    for record in published {
        let delivered = successes.contains_key(record.id.as_str());
        let envelope = parked_of.get(record.id.as_str());
        let outcome = match (delivered, envelope) {
            (true, _) => {
                figures.delivered += 1;
                Expect::Deliver
            }
            (false, Some(envelope)) => {
                figures.parked += 1;
                Expect::Park(envelope.reason)
            }
            (false, None) => {
                figures.lost += 1;
                if figures.lost_ids.len() < 20 {
                    figures.lost_ids.push(record.id.clone());
                }
                continue;
            }
        };
        if outcome != record.expect {
            figures.unexpected += 1;
            if figures.unexpected_examples.len() < 20 {
                figures.unexpected_examples.push(format!(
                    "{}: expected {}, got {}",
                    record.id,
                    describe(record.expect),
                    describe(outcome)
                ));
            }
        }
    }
    let spans: Vec<Span> = published
        .iter()
        .filter(|p| scope.healthy.contains(&p.endpoint))
        .map(|p| Span {
            start: p.at,
            end: finished.get(&p.id).copied(),
        })
        .collect();
    figures.longest_stall = longest_stall(&spans, (0.0, scope.end));
    figures.latency = Percentiles::of(
        published
            .iter()
            .filter_map(|p| Some((finished.get(&p.id)? - p.at).max(0.0)))
            .collect(),
    );
    figures.lateness = Percentiles::of(lateness(
        requests
            .iter()
            .filter(|r| scope.lateness.contains(&*r.endpoint)),
        scope.backoff_s,
    ));
    figures
}

fn describe(expect: Expect) -> String {
    match expect {
        Expect::Deliver => "delivered".to_owned(),
        Expect::Park(reason) => format!("parked as {}", reason.code()),
    }
}

/// One endpoint's share of the requests.
#[derive(Clone, Debug, Serialize)]
pub struct EndpointFigures {
    /// Its name.
    pub name: String,
    /// Requests received.
    pub requests: usize,
    /// Requests by answer (`204`, `503`, `reset`, `hang`).
    pub answers: BTreeMap<String, usize>,
    /// Its retry lateness.
    pub lateness: Option<Percentiles>,
}

/// Per-endpoint figures, in the order of `names`.
pub fn endpoint_figures(
    names: &[String],
    requests: &[Request],
    backoff_s: f64,
) -> Vec<EndpointFigures> {
    names
        .iter()
        .map(|name| {
            let mine: Vec<&Request> = requests.iter().filter(|r| &*r.endpoint == name).collect();
            let mut answers = BTreeMap::new();
            for request in &mine {
                let label = match request.answer {
                    Answer::Status(status) => status.to_string(),
                    Answer::Reset => "reset".to_owned(),
                    Answer::Hang => "hang".to_owned(),
                };
                *answers.entry(label).or_default() += 1;
            }
            EndpointFigures {
                name: name.clone(),
                requests: mine.len(),
                answers,
                lateness: Percentiles::of(lateness(mine.iter().copied(), backoff_s)),
            }
        })
        .collect()
}

/// A replica's departure (a kill or a stop) and what followed.
#[derive(Clone, Debug, Serialize)]
pub struct Departure {
    /// When, on the scenario's clock.
    pub at: f64,
    /// The replica (its `user-agent` name).
    pub replica: String,
    /// The partitions it was delivering for (its last first-attempt delivery of each).
    pub partitions: Vec<i32>,
    /// Its 2xx deliveries in the second before (perhaps not committed yet).
    pub recent_deliveries: usize,
    /// From the departure to the next delivery of each of its partitions; the longest.
    pub resumed_after_s: Option<f64>,
    /// The longest stall of the other partitions' events, from the departure until its
    /// partitions resumed (or 30 s).
    pub others_longest_stall_s: f64,
}

/// What followed the departure of `replica` at `at`.
pub fn departure(
    at: f64,
    replica: &str,
    published: &[Published],
    requests: &[Request],
    finished: &HashMap<String, f64>,
) -> Departure {
    let partition_of: HashMap<&str, i32> = published
        .iter()
        .map(|p| (p.id.as_str(), p.partition))
        .collect();
    let successes = || {
        requests
            .iter()
            .filter(|r| r.answer.is_success())
            .filter_map(|r| Some((r, *partition_of.get(r.id.as_str())?)))
    };
    let mut last_sender: BTreeMap<i32, (f64, &str)> = BTreeMap::new();
    for (request, partition) in successes().filter(|(r, _)| r.attempt == 1 && r.at < at) {
        let entry = last_sender
            .entry(partition)
            .or_insert((request.at, &request.agent));
        if request.at >= entry.0 {
            *entry = (request.at, &request.agent);
        }
    }
    let partitions: Vec<i32> = last_sender
        .iter()
        .filter(|(_, (_, agent))| *agent == replica)
        .map(|(partition, _)| *partition)
        .collect();
    let recent_deliveries = successes()
        .filter(|(r, _)| r.agent == replica && r.at <= at && r.at >= at - 1.0)
        .count();
    let resumed_after_s = partitions
        .iter()
        .filter_map(|partition| {
            successes()
                .filter(|(r, p)| p == partition && r.at > at)
                .map(|(r, _)| r.at - at)
                .min_by(f64::total_cmp)
        })
        .max_by(f64::total_cmp);
    let until = at + resumed_after_s.unwrap_or(30.0);
    let spans: Vec<Span> = published
        .iter()
        .filter(|p| !partitions.contains(&p.partition))
        .map(|p| Span {
            start: p.at,
            end: finished.get(&p.id).copied(),
        })
        .collect();
    Departure {
        at,
        replica: replica.to_owned(),
        partitions,
        recent_deliveries,
        resumed_after_s,
        others_longest_stall_s: longest_stall(&spans, (at, until)).seconds,
    }
}

/// The longest stall of each partition of the events topic: [`longest_stall`] over the
/// healthy endpoints' events of that partition alone.
pub fn partition_stalls(
    published: &[Published],
    finished: &HashMap<String, f64>,
    healthy: &HashSet<String>,
    end: f64,
) -> BTreeMap<i32, f64> {
    let mut spans: BTreeMap<i32, Vec<Span>> = BTreeMap::new();
    for record in published.iter().filter(|p| healthy.contains(&p.endpoint)) {
        spans.entry(record.partition).or_default().push(Span {
            start: record.at,
            end: finished.get(&record.id).copied(),
        });
    }
    spans
        .into_iter()
        .map(|(partition, spans)| (partition, longest_stall(&spans, (0.0, end)).seconds))
        .collect()
}

#[cfg(test)]
#[path = "analysis_tests.rs"]
mod tests;
