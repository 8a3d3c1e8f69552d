//! What one tenant event becomes, without I/O: the delivery records for its subscribers, or
//! the reason it is parked.

use std::sync::Arc;

use hookline_core::WebhookEvent;
use hookline_core::envelope::ErrorReason;
use hookline_core::framing;
use hookline_core::headers::is_delivery_header;
use hookline_core::signing::WEBHOOK_ID;

use crate::envelope::Failure;
use crate::record::SourceRecord;

/// Bytes a record takes in a batch beside its key, value and headers (a generous bound).
const RECORD_OVERHEAD: usize = 512;

/// How the deliveries are encoded: as the tenant event was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// JSON, as `WebhookEvent::to_json`.
    Json,
    /// Avro of the current event schema, framed with its id under the events topic's
    /// subject.
    Avro { schema_id: u32 },
}

/// One delivery record to write to the events topic.
#[derive(Debug)]
pub(crate) struct Delivery {
    /// The endpoint id (the record key).
    pub endpoint: Arc<str>,
    /// The encoded delivery event.
    pub value: Vec<u8>,
}

/// What becomes of a tenant event.
#[derive(Debug)]
pub(crate) enum Plan {
    /// One delivery per subscriber, in the subscribers' order (none: no subscriber).
    Deliver(Vec<Delivery>),
    /// It cannot be fanned out.
    Park(Failure),
}

/// Checks that a decoded event is a tenant event that can be fanned out.
pub(crate) fn check(
    event: &WebhookEvent,
    max_payload_bytes: usize,
    events_topic: &str,
) -> Result<(), Failure> {
    if let Err(error) = event.validate(max_payload_bytes) {
        return Err(Failure::new(error.reason(), error.to_string()));
    }
    if let Some(endpoint) = &event.endpoint_id {
        return Err(Failure::new(
            ErrorReason::MalformedEvent,
            format!(
                "the event names endpoint {endpoint:?}: a delivery to one endpoint is published \
                 to {events_topic}, the fan-out topic takes tenant events only"
            ),
        ));
    }
    if event.tenant_id.is_none() {
        return Err(Failure::new(
            ErrorReason::MalformedEvent,
            "the event names no tenant_id",
        ));
    }
    Ok(())
}

/// The deliveries of `event` to `subscribers`, each the event with its endpoint set,
/// encoded as `encoding` says. An event whose deliveries would not fit `max_message_bytes`
/// beside `headers` is parked as too large, before any of them is written.
pub(crate) fn plan(
    event: &WebhookEvent,
    subscribers: Vec<Arc<str>>,
    encoding: Encoding,
    headers: &[(String, Vec<u8>)],
    max_message_bytes: usize,
) -> Plan {
    let beside: usize = headers
        .iter()
        .map(|(name, value)| name.len() + value.len())
        .sum::<usize>()
        + RECORD_OVERHEAD;
    let mut deliveries = Vec::with_capacity(subscribers.len());
    let mut delivery = event.clone();
    for endpoint in subscribers {
        delivery.endpoint_id = Some(endpoint.to_string());
        let value = match encoding {
            Encoding::Json => delivery.to_json(),
            Encoding::Avro { schema_id } => match delivery.to_avro_datum() {
                Ok(datum) => framing::frame(schema_id, &datum),
                Err(error) => {
                    return Plan::Park(Failure::new(
                        ErrorReason::MalformedEvent,
                        format!("the delivery cannot be encoded: {error}"),
                    ));
                }
            },
        };
        let size = value.len() + endpoint.len() + beside;
        if size > max_message_bytes {
            return Plan::Park(Failure::new(
                ErrorReason::PayloadTooLarge,
                format!(
                    "a delivery of this event takes {size} bytes, over the events topic's \
                     limit of {max_message_bytes}"
                ),
            ));
        }
        deliveries.push(Delivery { endpoint, value });
    }
    Plan::Deliver(deliveries)
}

/// The headers of every delivery: the tenant event's own (hookline's delivery headers
/// aside, which only hookline writes on its tier topics), with `webhook-id` set to the
/// event id.
pub(crate) fn headers(record: &SourceRecord, event_id: &str) -> Vec<(String, Vec<u8>)> {
    let mut headers: Vec<(String, Vec<u8>)> = record
        .headers
        .iter()
        .filter(|(name, _)| !is_delivery_header(name) && !name.eq_ignore_ascii_case(WEBHOOK_ID))
        .map(|(name, value)| (name.clone(), value.clone().unwrap_or_default()))
        .collect();
    headers.push((WEBHOOK_ID.to_owned(), event_id.as_bytes().to_vec()));
    headers
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn tenant_event() -> WebhookEvent {
        WebhookEvent {
            event_id: "evt-1".into(),
            event_type: "invoice.paid".into(),
            endpoint_id: None,
            tenant_id: Some("acme".into()),
            channels: vec!["eu".into()],
            endpoint_url: None,
            payload: br#"{"n":1}"#.to_vec(),
            content_type: "application/json".into(),
            headers: BTreeMap::new(),
            created_at_ms: 5,
            expires_at_ms: None,
        }
    }

    fn ids(names: &[&str]) -> Vec<Arc<str>> {
        names.iter().map(|n| Arc::from(*n)).collect()
    }

    #[test]
    fn one_delivery_per_subscriber_with_the_same_event() {
        let event = tenant_event();
        let Plan::Deliver(deliveries) =
            plan(&event, ids(&["a", "b"]), Encoding::Json, &[], 1 << 20)
        else {
            panic!("expected deliveries");
        };
        assert_eq!(deliveries.len(), 2);
        for (delivery, name) in deliveries.iter().zip(["a", "b"]) {
            assert_eq!(&*delivery.endpoint, name);
            let back = WebhookEvent::from_json(&delivery.value).expect("JSON");
            assert_eq!(back.endpoint_id.as_deref(), Some(name));
            assert_eq!(
                WebhookEvent {
                    endpoint_id: None,
                    ..back
                },
                event
            );
        }
        let Plan::Deliver(none) = plan(&event, Vec::new(), Encoding::Json, &[], 1 << 20) else {
            panic!("expected no deliveries");
        };
        assert!(none.is_empty());
    }

    #[test]
    fn avro_deliveries_are_framed_with_the_schema_id() {
        let event = tenant_event();
        let Plan::Deliver(deliveries) = plan(
            &event,
            ids(&["a"]),
            Encoding::Avro { schema_id: 7 },
            &[],
            1 << 20,
        ) else {
            panic!("expected deliveries");
        };
        assert_eq!(&deliveries[0].value[..5], &[0, 0, 0, 0, 7]);
        let back = WebhookEvent::from_avro_datum(
            &deliveries[0].value[5..],
            hookline_core::schema::webhook_event_schema(),
        )
        .expect("Avro");
        assert_eq!(back.endpoint_id.as_deref(), Some("a"));
        assert_eq!(back.tenant_id.as_deref(), Some("acme"));
    }

    #[test]
    fn a_delivery_over_the_limit_parks_the_event() {
        let headers = vec![("x-big".to_owned(), vec![b'h'; 900])];
        let plan = plan(
            &tenant_event(),
            ids(&["a"]),
            Encoding::Json,
            &headers,
            1_000,
        );
        assert!(
            matches!(plan, Plan::Park(ref f) if f.reason == ErrorReason::PayloadTooLarge),
            "{plan:?}"
        );
    }

    #[test]
    fn only_tenant_events_are_fanned_out() {
        check(&tenant_event(), 1024, "ev").expect("a tenant event");
        let direct = WebhookEvent {
            endpoint_id: Some("ep".into()),
            ..tenant_event()
        };
        let failure = check(&direct, 1024, "ev").expect_err("a delivery");
        assert_eq!(failure.reason, ErrorReason::MalformedEvent);
        assert!(failure.message.contains("ev"), "{}", failure.message);
        let big = WebhookEvent {
            payload: vec![b'a'; 2048],
            ..tenant_event()
        };
        let failure = check(&big, 1024, "ev").expect_err("too large");
        assert_eq!(failure.reason, ErrorReason::PayloadTooLarge);
    }

    #[test]
    fn headers_carry_the_event_id_and_the_producers_own() {
        let record = SourceRecord {
            topic: "ev.fanout".into(),
            partition: 0,
            offset: 3,
            key: Some(b"acme".to_vec()),
            value: None,
            headers: vec![
                ("traceparent".into(), Some(b"00-abc-def-01".to_vec())),
                ("webhook-id".into(), Some(b"other".to_vec())),
                ("hookline-attempt".into(), Some(b"9".to_vec())),
            ],
            bad_header_name: None,
        };
        let headers = headers(&record, "evt-1");
        assert_eq!(
            headers,
            [
                ("traceparent".to_owned(), b"00-abc-def-01".to_vec()),
                ("webhook-id".to_owned(), b"evt-1".to_vec()),
            ]
        );
    }
}
