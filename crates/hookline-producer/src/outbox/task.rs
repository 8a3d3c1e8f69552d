//! A claimed task and its states; turning a row into the event it publishes, without I/O.

use std::collections::BTreeMap;

use hookline_core::WebhookEvent;

/// A task's state in the `status` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskStatus {
    /// Waiting to be published (also after a failed publish, until its backoff passed).
    NotCalled,
    /// Claimed by a relay, under a lease.
    Wip,
    /// Published: Kafka acknowledged it.
    Complete,
    /// Refused `max_retries` times; waits for `hookline outbox retry`.
    Failed,
}

impl TaskStatus {
    /// The column's value.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::NotCalled => "NOT_CALLED",
            TaskStatus::Wip => "WIP",
            TaskStatus::Complete => "COMPLETE",
            TaskStatus::Failed => "FAILED",
        }
    }

    /// Every state, in lifecycle order.
    pub const ALL: [TaskStatus; 4] = [
        TaskStatus::NotCalled,
        TaskStatus::Wip,
        TaskStatus::Complete,
        TaskStatus::Failed,
    ];
}

/// A task as the claim returns it.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct Task {
    pub id: String,
    pub aggregatetype: String,
    pub aggregateid: String,
    #[sqlx(rename = "type")]
    pub event_type: String,
    pub payload: String,
    pub content_type: String,
    pub headers: String,
    pub tenant_id: Option<String>,
    pub channels: Vec<String>,
    pub endpoint_url: Option<String>,
    pub created_ms: i64,
    pub expires_ms: Option<i64>,
    pub retry_count: i32,
}

impl Task {
    /// The event the relay publishes for this task: the same as a producer would hand
    /// to the [`Publisher`](crate::Publisher), with the task id as event id. Errors say
    /// what is wrong with the row.
    pub fn to_event(&self) -> Result<WebhookEvent, String> {
        let headers: BTreeMap<String, String> = serde_json::from_str(&self.headers)
            .map_err(|error| format!("headers must be an object of strings: {error}"))?;
        let (endpoint_id, tenant_id) = match self.aggregatetype.as_str() {
            "endpoint" => (Some(self.aggregateid.clone()), self.tenant_id.clone()),
            "tenant" => (None, Some(self.aggregateid.clone())),
            other => return Err(format!("unknown aggregatetype {other:?}")),
        };
        Ok(WebhookEvent {
            event_id: self.id.clone(),
            event_type: self.event_type.clone(),
            endpoint_id,
            tenant_id,
            channels: self.channels.clone(),
            endpoint_url: self.endpoint_url.clone(),
            payload: self.payload.clone().into_bytes(),
            content_type: self.content_type.clone(),
            headers,
            created_at_ms: self.created_ms,
            expires_at_ms: self.expires_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task {
            id: "0190c0de-0000-7000-8000-000000000001".into(),
            aggregatetype: "endpoint".into(),
            aggregateid: "ep_1".into(),
            event_type: "invoice.paid".into(),
            payload: r#"{"amount":42}"#.into(),
            content_type: "application/json".into(),
            headers: r#"{"X-Order": "7"}"#.into(),
            tenant_id: Some("acme".into()),
            channels: vec!["eu".into()],
            endpoint_url: None,
            created_ms: 1_700_000_000_000,
            expires_ms: None,
            retry_count: 0,
        }
    }

    #[test]
    fn an_endpoint_task_is_a_delivery_keeping_the_payload_bytes() {
        let event = task().to_event().expect("valid");
        assert_eq!(event.event_id, "0190c0de-0000-7000-8000-000000000001");
        assert_eq!(event.endpoint_id.as_deref(), Some("ep_1"));
        assert_eq!(event.tenant_id.as_deref(), Some("acme"));
        assert_eq!(event.payload, br#"{"amount":42}"#);
        assert_eq!(event.headers.get("X-Order").map(String::as_str), Some("7"));
        assert_eq!(event.created_at_ms, 1_700_000_000_000);
        event.validate(1024).expect("a valid event");
    }

    #[test]
    fn a_tenant_task_is_a_tenant_event_and_bad_rows_say_why() {
        let tenant = Task {
            aggregatetype: "tenant".into(),
            aggregateid: "acme".into(),
            tenant_id: None,
            ..task()
        };
        let event = tenant.to_event().expect("valid");
        assert_eq!(event.endpoint_id, None);
        assert_eq!(event.tenant_id.as_deref(), Some("acme"));
        let bad = Task {
            headers: r#"{"X-Number": 7}"#.into(),
            ..task()
        };
        assert!(bad.to_event().expect_err("bad headers").contains("headers"));
    }
}
