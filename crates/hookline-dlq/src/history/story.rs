//! One event's attempt-log records as its story: steps in time order, as text and as JSON.
//! Pure: no I/O.

use std::collections::BTreeSet;

use hookline_core::attempt_log::{AttemptKind, AttemptRecord};
use serde_json::{Map, Value, json};

use crate::escape::escape_control;
use crate::filter::format_ms;

/// What a step of the story says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// The event was published (once, first).
    Published,
    /// A tenant event became deliveries.
    FannedOut,
    /// A delivery was redriven from the DLQ (before the attempts that followed).
    Redriven,
    /// One HTTP attempt and its answer.
    Attempt,
    /// After a failed attempt, written to a retry tier.
    RetryScheduled,
    /// Put off to a tier without an attempt.
    Deferred,
    /// Written to the DLQ.
    Parked,
    /// The endpoint accepted it (after a successful attempt).
    Delivered,
}

impl StepKind {
    /// The name in text and JSON.
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Published => "published",
            StepKind::FannedOut => "fanned_out",
            StepKind::Redriven => "redriven",
            StepKind::Attempt => "attempt",
            StepKind::RetryScheduled => "retry_scheduled",
            StepKind::Deferred => "deferred",
            StepKind::Parked => "parked",
            StepKind::Delivered => "delivered",
        }
    }
}

/// One step of an event's story.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// What happened.
    pub kind: StepKind,
    /// When, epoch milliseconds.
    pub at_ms: i64,
    /// The record it comes from (`None` for `published` and `redriven`, which are read off
    /// the records that follow them).
    pub record: Option<AttemptRecord>,
    /// For `redriven`: the DLQ record, `<dlq topic>/<partition>/<offset>`.
    pub redriven_from: Option<String>,
    /// For `redriven`: the endpoint of the delivery redriven.
    pub endpoint_id: Option<String>,
}

/// The story of one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Story {
    /// The event id.
    pub event_id: String,
    /// Its steps in time order.
    pub steps: Vec<Step>,
}

/// Where a record sorts among records of the same millisecond, after its attempt number
/// (a step before attempt n carries n - 1): a fan-out before the deliveries, an attempt
/// before where it led.
fn rank(kind: AttemptKind) -> u8 {
    match kind {
        AttemptKind::FannedOut => 0,
        AttemptKind::Attempt => 1,
        AttemptKind::RetryScheduled | AttemptKind::Deferred | AttemptKind::Parked => 2,
    }
}

impl Story {
    /// The story of `event_id` from its records (any order, any dispatchers).
    pub fn build(event_id: &str, mut records: Vec<AttemptRecord>) -> Story {
        records.retain(|r| r.event_id == event_id);
        records.sort_by_key(|r| (r.timestamp_ms, r.attempt, rank(r.kind)));
        let mut steps = Vec::with_capacity(records.len() + 2);
        if let Some(published) = records.iter().filter_map(|r| r.published_at_ms).min() {
            steps.push(Step {
                kind: StepKind::Published,
                at_ms: published,
                record: None,
                redriven_from: None,
                endpoint_id: None,
            });
        }
        let mut redrives = BTreeSet::new();
        for record in records {
            if let Some(from) = &record.redriven_from
                && redrives.insert((record.endpoint_id.clone(), from.clone()))
            {
                steps.push(Step {
                    kind: StepKind::Redriven,
                    at_ms: record.timestamp_ms,
                    record: None,
                    redriven_from: Some(from.clone()),
                    endpoint_id: record.endpoint_id.clone(),
                });
            }
            let kind = match record.kind {
                AttemptKind::Attempt => StepKind::Attempt,
                AttemptKind::RetryScheduled => StepKind::RetryScheduled,
                AttemptKind::Deferred => StepKind::Deferred,
                AttemptKind::Parked => StepKind::Parked,
                AttemptKind::FannedOut => StepKind::FannedOut,
            };
            let delivered = record.kind == AttemptKind::Attempt && record.error_kind.is_none();
            let at_ms = record.timestamp_ms;
            steps.push(Step {
                kind,
                at_ms,
                record: Some(record.clone()),
                redriven_from: None,
                endpoint_id: None,
            });
            if delivered {
                steps.push(Step {
                    kind: StepKind::Delivered,
                    at_ms,
                    record: Some(record),
                    redriven_from: None,
                    endpoint_id: None,
                });
            }
        }
        Story {
            event_id: event_id.to_owned(),
            steps,
        }
    }

    /// Whether no record of the event was found.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    fn records(&self) -> impl Iterator<Item = &AttemptRecord> {
        self.steps.iter().filter_map(|s| s.record.as_ref())
    }

    /// The endpoints it was delivered to (or tried), in name order.
    pub fn endpoints(&self) -> Vec<String> {
        let set: BTreeSet<String> = self
            .records()
            .filter_map(|r| r.endpoint_id.clone())
            .collect();
        set.into_iter().collect()
    }

    /// The dispatchers that wrote its records, in name order.
    pub fn dispatchers(&self) -> Vec<String> {
        let set: BTreeSet<String> = self.records().map(|r| r.dispatcher_id.clone()).collect();
        set.into_iter().collect()
    }

    /// Its tenant, for a tenant event.
    pub fn tenant_id(&self) -> Option<String> {
        self.records().find_map(|r| r.tenant_id.clone())
    }

    /// The story as lines of text: a heading, then one line per step.
    pub fn to_text(&self) -> String {
        let mut out = format!("event {}", escape_control(&self.event_id));
        if let Some(tenant) = self.tenant_id() {
            out.push_str(&format!(" (tenant {})", escape_control(&tenant)));
        }
        let endpoints = self.endpoints();
        out.push_str(&format!(
            ": {} steps, {} endpoint{}, dispatchers {}\n",
            self.steps.len(),
            endpoints.len(),
            if endpoints.len() == 1 { "" } else { "s" },
            escape_control(&self.dispatchers().join(", ")),
        ));
        for step in &self.steps {
            out.push_str(&step_line(step));
            out.push('\n');
        }
        out
    }

    /// The story as JSON: `{"event_id", "tenant_id", "endpoints", "dispatchers", "steps"}`,
    /// each step an object with `step`, `at` (RFC 3339) and `at_ms`, and the fields it has.
    pub fn to_json(&self) -> Value {
        json!({
            "event_id": self.event_id,
            "tenant_id": self.tenant_id(),
            "endpoints": self.endpoints(),
            "dispatchers": self.dispatchers(),
            "steps": self.steps.iter().map(step_json).collect::<Vec<_>>(),
        })
    }
}

fn time(ms: i64) -> String {
    format_ms(ms)
        .replace('T', " ")
        .trim_end_matches('Z')
        .to_owned()
}

/// A step's line: time, step, endpoint, then what it says.
fn step_line(step: &Step) -> String {
    let name = match (&step.kind, &step.record) {
        (StepKind::Attempt, Some(r)) => format!("attempt {}", r.attempt),
        (kind, _) => kind.name().to_owned(),
    };
    let endpoint = step
        .record
        .as_ref()
        .and_then(|r| r.endpoint_id.as_deref())
        .or(step.endpoint_id.as_deref())
        .unwrap_or("-");
    let mut line = format!(
        "{}  {:<15}  {:<16}  ",
        time(step.at_ms),
        name,
        escape_control(endpoint)
    );
    line.push_str(&escape_control(&detail(step)));
    line.trim_end().to_owned()
}

fn detail(step: &Step) -> String {
    let Some(r) = &step.record else {
        return match &step.redriven_from {
            Some(from) => format!("from DLQ {from}"),
            None => String::new(),
        };
    };
    let by = format!("by {}", r.dispatcher_id);
    match step.kind {
        StepKind::Published | StepKind::Redriven => String::new(),
        StepKind::FannedOut => format!(
            "to {} deliveries  {by}",
            r.deliveries
                .map_or_else(|| "?".to_owned(), |n| n.to_string())
        ),
        StepKind::Attempt => {
            let mut parts = Vec::new();
            parts.push(match r.http_status {
                Some(status) => format!("HTTP {status}"),
                None => "no answer".to_owned(),
            });
            if let Some(kind) = &r.error_kind {
                parts.push(kind.clone());
            }
            if let Some(ms) = r.duration_ms {
                parts.push(format!("{ms} ms"));
            }
            parts.push(by);
            if let Some(body) = &r.response_excerpt {
                let short: String = body.chars().take(80).collect();
                let cut = if short.len() < body.len() { "…" } else { "" };
                parts.push(format!("response {short:?}{cut}"));
            }
            parts.join("  ")
        }
        StepKind::RetryScheduled => format!(
            "to tier {} ({})  {by}",
            r.tier.as_deref().unwrap_or("?"),
            r.reason.as_deref().unwrap_or("?")
        ),
        StepKind::Deferred if r.tier.as_deref() == Some("lane") => format!(
            "to the slow lane ({})  {by}",
            r.reason.as_deref().unwrap_or("?")
        ),
        StepKind::Deferred => format!(
            "to tier {} ({})  {by}",
            r.tier.as_deref().unwrap_or("?"),
            r.reason.as_deref().unwrap_or("?")
        ),
        StepKind::Parked => format!(
            "{} after {} attempts  {by}",
            r.reason.as_deref().unwrap_or("?"),
            r.attempt
        ),
        StepKind::Delivered => format!("after {} attempts  {by}", r.attempt),
    }
}

/// A step as JSON.
pub(crate) fn step_json(step: &Step) -> Value {
    let mut out = Map::new();
    out.insert("step".into(), json!(step.kind.name()));
    out.insert("at".into(), json!(format_ms(step.at_ms)));
    out.insert("at_ms".into(), json!(step.at_ms));
    if let Some(from) = &step.redriven_from {
        out.insert("redriven_from".into(), json!(from));
    }
    if let Some(endpoint) = &step.endpoint_id {
        out.insert("endpoint_id".into(), json!(endpoint));
    }
    if let Some(r) = &step.record {
        record_fields(r, &mut out);
    }
    Value::Object(out)
}

/// A record's fields that are set, into `out`.
pub(crate) fn record_fields(r: &AttemptRecord, out: &mut Map<String, Value>) {
    let mut put = |key: &str, value: Value| {
        if !value.is_null() {
            out.insert(key.into(), value);
        }
    };
    put("kind", json!(r.kind.symbol()));
    put("endpoint_id", json!(r.endpoint_id));
    put("tenant_id", json!(r.tenant_id));
    put("attempt", json!(r.attempt));
    put("http_status", json!(r.http_status));
    put("error_kind", json!(r.error_kind));
    put("duration_ms", json!(r.duration_ms));
    put("response_excerpt", json!(r.response_excerpt));
    put("tier", json!(r.tier));
    put("reason", json!(r.reason));
    put("deliveries", json!(r.deliveries));
    put("dispatcher_id", json!(r.dispatcher_id));
    put("trace_id", json!(r.trace_id));
    put("published_at_ms", json!(r.published_at_ms));
    if r.kind != AttemptKind::FannedOut {
        put("redriven_from", json!(r.redriven_from));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: AttemptKind, at: i64, attempt: u32, by: &str) -> AttemptRecord {
        AttemptRecord {
            event_id: "evt-1".into(),
            tenant_id: None,
            endpoint_id: Some("ep-x".into()),
            kind,
            attempt,
            timestamp_ms: at,
            duration_ms: None,
            http_status: None,
            error_kind: None,
            response_excerpt: None,
            tier: None,
            reason: None,
            deliveries: None,
            dispatcher_id: by.into(),
            trace_id: None,
            published_at_ms: Some(1_000),
            redriven_from: None,
        }
    }

    fn failed(at: i64, attempt: u32, by: &str) -> AttemptRecord {
        AttemptRecord {
            http_status: Some(500),
            error_kind: Some("server_error".into()),
            duration_ms: Some(12),
            response_excerpt: Some("upstream\u{1b}[31m down".into()),
            ..rec(AttemptKind::Attempt, at, attempt, by)
        }
    }

    /// Retried, parked, redriven and delivered, by two dispatchers, given out of order and
    /// among another event's records.
    fn records() -> Vec<AttemptRecord> {
        let redriven = |r: AttemptRecord| AttemptRecord {
            redriven_from: Some("ev.dlq/0/4".into()),
            ..r
        };
        vec![
            redriven(AttemptRecord {
                http_status: Some(200),
                duration_ms: Some(3),
                ..rec(AttemptKind::Attempt, 9_000, 1, "disp-b")
            }),
            AttemptRecord {
                reason: Some("retries_exhausted".into()),
                ..rec(AttemptKind::Parked, 3_000, 2, "disp-a")
            },
            failed(3_000, 2, "disp-a"),
            AttemptRecord {
                tier: Some("200ms".into()),
                reason: Some("server_error".into()),
                ..rec(AttemptKind::RetryScheduled, 2_000, 1, "disp-a")
            },
            failed(2_000, 1, "disp-a"),
            AttemptRecord {
                event_id: "evt-other".into(),
                ..failed(2_500, 1, "disp-a")
            },
        ]
    }

    #[test]
    fn the_story_is_every_step_in_order_across_dispatchers() {
        let story = Story::build("evt-1", records());
        let kinds: Vec<&str> = story.steps.iter().map(|s| s.kind.name()).collect();
        assert_eq!(
            kinds,
            [
                "published",
                "attempt",
                "retry_scheduled",
                "attempt",
                "parked",
                "redriven",
                "attempt",
                "delivered"
            ]
        );
        assert_eq!(story.steps[0].at_ms, 1_000);
        assert_eq!(story.steps[5].redriven_from.as_deref(), Some("ev.dlq/0/4"));
        assert_eq!(story.dispatchers(), ["disp-a", "disp-b"]);
        let text = story.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("event evt-1: 8 steps, 1 endpoint, dispatchers disp-a, disp-b")
        );
        assert!(lines[1].contains("  published "), "{}", lines[1]);
        assert!(
            lines[2].contains("attempt 1")
                && lines[2].contains("HTTP 500  server_error  12 ms  by disp-a"),
            "{}",
            lines[2]
        );
        assert!(
            lines[2].contains(r#"response "upstream\u{1b}[31m down""#),
            "escaped: {}",
            lines[2]
        );
        assert!(
            !text.contains('\u{1b}'),
            "no control character reaches the terminal"
        );
        assert!(
            lines[3].contains("to tier 200ms (server_error)"),
            "{}",
            lines[3]
        );
        assert!(
            lines[5].contains("retries_exhausted after 2 attempts  by disp-a"),
            "{}",
            lines[5]
        );
        assert!(lines[6].contains("from DLQ ev.dlq/0/4"), "{}", lines[6]);
        assert!(
            lines[8].contains("delivered") && lines[8].contains("by disp-b"),
            "{}",
            lines[8]
        );
    }

    #[test]
    fn a_deferral_sorts_before_the_attempt_it_led_to_in_the_same_millisecond() {
        // The lane's attempt was logged first: its dispatcher read the lane record back
        // before the deferral's write was acknowledged.
        let records = vec![
            AttemptRecord {
                http_status: Some(200),
                ..rec(AttemptKind::Attempt, 5_000, 1, "disp-a")
            },
            AttemptRecord {
                tier: Some("lane".into()),
                reason: Some("endpoint_new".into()),
                ..rec(AttemptKind::Deferred, 5_000, 0, "disp-a")
            },
            failed(5_000, 1, "disp-b"),
            AttemptRecord {
                tier: Some("1s".into()),
                reason: Some("circuit_open".into()),
                ..rec(AttemptKind::Deferred, 5_000, 1, "disp-b")
            },
        ];
        let kinds: Vec<&str> = Story::build("evt-1", records)
            .steps
            .iter()
            .map(|s| s.kind.name())
            .collect();
        assert_eq!(
            kinds,
            [
                "published",
                "deferred",
                "attempt",
                "delivered",
                "attempt",
                "deferred"
            ]
        );
    }

    #[test]
    fn the_json_has_the_documented_shape() {
        let json = Story::build("evt-1", records()).to_json();
        assert_eq!(json["event_id"], "evt-1");
        assert_eq!(json["endpoints"], json!(["ep-x"]));
        let steps = json["steps"].as_array().expect("steps");
        assert_eq!(steps.len(), 8);
        assert_eq!(
            steps[0],
            json!({"step": "published", "at": "1970-01-01T00:00:01.000Z", "at_ms": 1000})
        );
        assert_eq!(steps[1]["http_status"], 500);
        assert_eq!(steps[1]["dispatcher_id"], "disp-a");
        assert_eq!(steps[2]["tier"], "200ms");
        assert_eq!(steps[4]["reason"], "retries_exhausted");
        assert_eq!(steps[5]["redriven_from"], "ev.dlq/0/4");
        assert_eq!(steps[7]["step"], "delivered");
        assert_eq!(steps[7]["dispatcher_id"], "disp-b");
    }

    #[test]
    fn a_tenant_event_tells_its_fan_out_and_each_delivery() {
        let fanned = AttemptRecord {
            tenant_id: Some("acme".into()),
            endpoint_id: None,
            deliveries: Some(2),
            ..rec(AttemptKind::FannedOut, 1_500, 0, "disp-a")
        };
        let ok = |ep: &str| AttemptRecord {
            tenant_id: Some("acme".into()),
            endpoint_id: Some(ep.into()),
            http_status: Some(204),
            ..rec(AttemptKind::Attempt, 1_600, 1, "disp-a")
        };
        let story = Story::build("evt-1", vec![ok("ep-b"), ok("ep-a"), fanned]);
        let kinds: Vec<&str> = story.steps.iter().map(|s| s.kind.name()).collect();
        assert_eq!(
            kinds,
            [
                "published",
                "fanned_out",
                "attempt",
                "delivered",
                "attempt",
                "delivered"
            ]
        );
        assert_eq!(story.endpoints(), ["ep-a", "ep-b"]);
        assert!(
            story
                .to_text()
                .starts_with("event evt-1 (tenant acme): 6 steps, 2 endpoints")
        );
        assert!(story.to_text().contains("to 2 deliveries"));
    }

    #[test]
    fn version_1_records_tell_their_story_without_a_publish_time() {
        let old = AttemptRecord {
            published_at_ms: None,
            ..failed(2_000, 1, "disp-a")
        };
        let story = Story::build("evt-1", vec![old]);
        assert_eq!(story.steps[0].kind, StepKind::Attempt);
        assert!(Story::build("evt-none", records()).is_empty());
    }
}
