//! Following the attempt log: every partition from its end, each new record decoded and
//! filtered by endpoint and tenant, one line each.

use std::sync::Arc;
use std::time::Duration;

use hookline_core::attempt_log::AttemptRecord;
use hookline_kafka::{KafkaSettings, Registry};
use rdkafka::message::Message;
use serde_json::{Map, Value, json};

use super::story::record_fields;
use crate::error::{DlqError, Result};
use crate::escape::escape_control;
use crate::filter::format_ms;
use crate::reader::{Start, TopicReader};

/// Which records a tail shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TailFilter {
    /// Only this endpoint's.
    pub endpoint: Option<String>,
    /// Only this tenant's.
    pub tenant: Option<String>,
}

impl TailFilter {
    /// Whether `record` is shown.
    pub fn matches(&self, record: &AttemptRecord) -> bool {
        let endpoint = self
            .endpoint
            .as_ref()
            .is_none_or(|want| record.endpoint_id.as_ref() == Some(want));
        let tenant = self
            .tenant
            .as_ref()
            .is_none_or(|want| record.tenant_id.as_ref() == Some(want));
        endpoint && tenant
    }
}

/// A follower of the attempt log.
pub struct Tail {
    reader: TopicReader,
    registry: Arc<Registry>,
    filter: TailFilter,
}

impl Tail {
    /// Starts following `topic` at its end: only records written from now on are read.
    pub async fn open(
        kafka: &KafkaSettings,
        registry: Arc<Registry>,
        topic: &str,
        filter: TailFilter,
    ) -> Result<Tail> {
        let reader = TopicReader::open(kafka, topic, true, Duration::from_secs(30), |_| {
            Some(Start::End)
        })
        .await?;
        Ok(Tail {
            reader,
            registry,
            filter,
        })
    }

    /// The next record that matches the filter (waits for one). Records that cannot be
    /// decoded are skipped; a registry that cannot be reached is an error.
    pub async fn next(&mut self) -> Result<AttemptRecord> {
        loop {
            let Some(message) = self.reader.next().await? else {
                continue;
            };
            let Some(bytes) = message.payload() else {
                continue;
            };
            let value = match self.registry.decode(bytes).await {
                Ok(value) => value,
                Err(source) if source.is_transient() => {
                    return Err(DlqError::Registry {
                        context: "decoding an attempt record through the schema registry"
                            .to_owned(),
                        source: Box::new(source),
                    });
                }
                Err(_) => continue,
            };
            if let Ok(record) = AttemptRecord::from_avro_value(value)
                && self.filter.matches(&record)
            {
                return Ok(record);
            }
        }
    }
}

/// One record as a line: time, event id, kind, endpoint, tenant, then what it says.
pub fn tail_line(r: &AttemptRecord) -> String {
    let time = format_ms(r.timestamp_ms);
    let mut parts = vec![
        time,
        r.event_id.clone(),
        r.kind.symbol().to_owned(),
        format!("endpoint={}", r.endpoint_id.as_deref().unwrap_or("-")),
        format!("tenant={}", r.tenant_id.as_deref().unwrap_or("-")),
        format!("attempt={}", r.attempt),
    ];
    if let Some(status) = r.http_status {
        parts.push(format!("status={status}"));
    }
    if let Some(kind) = &r.error_kind {
        parts.push(format!("error={kind}"));
    }
    if let Some(ms) = r.duration_ms {
        parts.push(format!("took={ms}ms"));
    }
    if let Some(tier) = &r.tier {
        parts.push(format!("tier={tier}"));
    }
    if let Some(reason) = &r.reason {
        parts.push(format!("reason={reason}"));
    }
    if let Some(n) = r.deliveries {
        parts.push(format!("deliveries={n}"));
    }
    parts.push(format!("by={}", r.dispatcher_id));
    escape_control(&parts.join("  ")).into_owned()
}

/// One record as a JSON object: `event_id`, `at`, `at_ms`, and the fields it has.
pub fn tail_json(r: &AttemptRecord) -> Value {
    let mut out = Map::new();
    out.insert("event_id".into(), json!(r.event_id));
    out.insert("at".into(), json!(format_ms(r.timestamp_ms)));
    out.insert("at_ms".into(), json!(r.timestamp_ms));
    record_fields(r, &mut out);
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use hookline_core::attempt_log::AttemptKind;

    use super::*;

    fn record(endpoint: Option<&str>, tenant: Option<&str>) -> AttemptRecord {
        AttemptRecord {
            event_id: "evt-1".into(),
            tenant_id: tenant.map(str::to_owned),
            endpoint_id: endpoint.map(str::to_owned),
            kind: AttemptKind::Attempt,
            attempt: 1,
            timestamp_ms: 0,
            duration_ms: Some(4),
            http_status: Some(503),
            error_kind: Some("server_error".into()),
            response_excerpt: None,
            tier: None,
            reason: None,
            deliveries: None,
            dispatcher_id: "d".into(),
            trace_id: None,
            published_at_ms: None,
            redriven_from: None,
        }
    }

    #[test]
    fn the_filter_wants_both_endpoint_and_tenant() {
        let filter = TailFilter {
            endpoint: Some("ep-a".into()),
            tenant: Some("acme".into()),
        };
        assert!(filter.matches(&record(Some("ep-a"), Some("acme"))));
        assert!(!filter.matches(&record(Some("ep-b"), Some("acme"))));
        assert!(!filter.matches(&record(Some("ep-a"), None)));
        assert!(TailFilter::default().matches(&record(None, None)));
    }

    #[test]
    fn a_line_says_what_happened() {
        let line = tail_line(&record(Some("ep-\u{1b}a"), None));
        assert_eq!(
            line,
            "1970-01-01T00:00:00.000Z  evt-1  attempt  endpoint=ep-\\x1ba  tenant=-  attempt=1  \
             status=503  error=server_error  took=4ms  by=d"
        );
        let json = tail_json(&record(Some("ep-a"), None));
        assert_eq!(json["event_id"], "evt-1");
        assert_eq!(json["http_status"], 503);
    }
}
