//! Writing an event into the outbox in the caller's transaction.

use hookline_core::WebhookEvent;
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::{OutboxError, schema_ok};

/// Inserts `event` into `hookline_outbox` (found on the connection's `search_path`,
/// `public` by default) inside `transaction`: the event is published if and only if the
/// transaction commits. Returns the task id, which is the event id: the event's own if it
/// is a UUID, a new UUID v7 if it is empty. The event is validated first (its size is
/// checked by the relay's publisher); a non-JSON payload is refused (the column is `json`).
/// A `created_at_ms` of 0 becomes the transaction's time.
pub async fn enqueue(
    transaction: &mut Transaction<'_, Postgres>,
    event: &WebhookEvent,
) -> Result<Uuid, OutboxError> {
    insert(transaction, "hookline_outbox", event).await
}

/// [`enqueue`] into the outbox table of `schema`.
pub async fn enqueue_in(
    transaction: &mut Transaction<'_, Postgres>,
    schema: &str,
    event: &WebhookEvent,
) -> Result<Uuid, OutboxError> {
    if !schema_ok(schema) {
        return Err(OutboxError::config(
            "schema",
            format!("{schema:?} must be lower-case letters, digits and `_` (at most 63)"),
        ));
    }
    insert(transaction, &format!("{schema}.hookline_outbox"), event).await
}

/// The row's values, checked, without I/O.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Row<'a> {
    pub id: Uuid,
    pub aggregatetype: &'static str,
    pub aggregateid: &'a str,
    pub tenant_id: Option<&'a str>,
    pub payload: &'a str,
    pub headers: String,
}

pub(crate) fn row(event: &WebhookEvent) -> Result<Row<'_>, OutboxError> {
    let id = if event.event_id.is_empty() {
        Uuid::now_v7()
    } else {
        Uuid::parse_str(&event.event_id)
            .map_err(|_| OutboxError::EventId(event.event_id.clone()))?
    };
    let mut checked = event.clone();
    checked.event_id = id.to_string();
    checked.validate(usize::MAX).map_err(OutboxError::Invalid)?;
    let payload =
        std::str::from_utf8(&event.payload).map_err(|_| OutboxError::PayloadNotJson(not_utf8()))?;
    serde_json::from_str::<serde::de::IgnoredAny>(payload).map_err(OutboxError::PayloadNotJson)?;
    let (aggregatetype, aggregateid, tenant_id) = match (&event.endpoint_id, &event.tenant_id) {
        (Some(endpoint), tenant) => ("endpoint", endpoint.as_str(), tenant.as_deref()),
        (None, Some(tenant)) => ("tenant", tenant.as_str(), None),
        // `validate` refused an event without either.
        (None, None) => {
            return Err(OutboxError::Invalid(hookline_core::EventError::NoRecipient));
        }
    };
    let headers = serde_json::to_string(&event.headers).map_err(OutboxError::PayloadNotJson)?;
    Ok(Row {
        id,
        aggregatetype,
        aggregateid,
        tenant_id,
        payload,
        headers,
    })
}

fn not_utf8() -> serde_json::Error {
    serde::de::Error::custom("the payload is not UTF-8")
}

async fn insert(
    transaction: &mut Transaction<'_, Postgres>,
    table: &str,
    event: &WebhookEvent,
) -> Result<Uuid, OutboxError> {
    let row = row(event)?;
    let statement = format!(
        "INSERT INTO {table} (id, aggregatetype, aggregateid, type, payload, content_type, \
           headers, tenant_id, channels, endpoint_url, created_ts, expires_at) \
         VALUES ($1::uuid, $2, $3, $4, $5::json, $6, $7::jsonb, $8, $9, $10, \
           COALESCE(to_timestamp($11::bigint / 1000.0), now()), to_timestamp($12::bigint / 1000.0))"
    );
    let created = (event.created_at_ms != 0).then_some(event.created_at_ms);
    sqlx::query(&statement)
        .bind(row.id.to_string())
        .bind(row.aggregatetype)
        .bind(row.aggregateid)
        .bind(&event.event_type)
        .bind(row.payload)
        .bind(&event.content_type)
        .bind(&row.headers)
        .bind(row.tenant_id)
        .bind(&event.channels)
        .bind(event.endpoint_url.as_deref())
        .bind(created)
        .bind(event.expires_at_ms)
        .execute(&mut **transaction)
        .await
        .map_err(|source| OutboxError::Postgres {
            op: "enqueue",
            source,
        })?;
    Ok(row.id)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn event() -> WebhookEvent {
        WebhookEvent {
            event_id: String::new(),
            event_type: "invoice.paid".into(),
            endpoint_id: Some("ep_1".into()),
            tenant_id: None,
            channels: Vec::new(),
            endpoint_url: None,
            payload: br#"{"amount":42}"#.to_vec(),
            content_type: "application/json".into(),
            headers: BTreeMap::new(),
            created_at_ms: 0,
            expires_at_ms: None,
        }
    }

    #[test]
    fn rows_of_deliveries_and_tenant_events() {
        let given = event();
        let delivery = row(&given).expect("valid");
        assert_eq!(delivery.aggregatetype, "endpoint");
        assert_eq!(delivery.aggregateid, "ep_1");
        assert_eq!(delivery.id.get_version_num(), 7);
        assert_eq!(delivery.headers, "{}");
        let tenant = WebhookEvent {
            endpoint_id: None,
            tenant_id: Some("acme".into()),
            event_id: "0190c0de-0000-7000-8000-000000000001".into(),
            ..event()
        };
        let row = row(&tenant).expect("valid");
        assert_eq!((row.aggregatetype, row.aggregateid), ("tenant", "acme"));
        assert_eq!(row.id.to_string(), tenant.event_id);
    }

    #[test]
    fn refuses_what_the_table_cannot_hold() {
        let named = WebhookEvent {
            event_id: "evt_1".into(),
            ..event()
        };
        assert!(matches!(row(&named), Err(OutboxError::EventId(id)) if id == "evt_1"));
        let text = WebhookEvent {
            payload: b"not json".to_vec(),
            content_type: "text/plain".into(),
            ..event()
        };
        assert!(matches!(row(&text), Err(OutboxError::PayloadNotJson(_))));
        let nobody = WebhookEvent {
            endpoint_id: None,
            ..event()
        };
        assert!(matches!(row(&nobody), Err(OutboxError::Invalid(_))));
    }
}
