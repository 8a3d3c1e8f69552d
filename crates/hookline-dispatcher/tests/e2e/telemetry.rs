//! Trace export: a delivery of a traced event reaches an OTLP/HTTP collector (a real one in
//! the test, decoding the protobuf) as a `process` span on the event's trace with a CLIENT
//! `POST` span below it, whose id is the parent id the receiver got; with the collector
//! down, deliveries go on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use hookline_core::secret::Secret;
use hookline_testkit::{Reply, wait_until};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;

use crate::harness::{DEADLINE, Harness, event};

/// What the collector got: each span with its resource's `service.name`, and the
/// `x-collector-token` header of each export.
#[derive(Clone, Default)]
struct Collected {
    spans: Arc<Mutex<Vec<(String, Span)>>>,
    tokens: Arc<Mutex<Vec<String>>>,
}

impl Collected {
    fn spans(&self) -> Vec<(String, Span)> {
        self.spans.lock().expect("spans").clone()
    }
}

async fn export(
    State(collected): State<Collected>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Vec<u8>) {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, Vec::new());
    };
    if let Some(token) = headers
        .get("x-collector-token")
        .and_then(|v| v.to_str().ok())
    {
        collected
            .tokens
            .lock()
            .expect("tokens")
            .push(token.to_owned());
    }
    let mut spans = collected.spans.lock().expect("spans");
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|resource| resource.attributes.iter())
            .find(|kv| kv.key == "service.name")
            .and_then(string)
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                spans.push((service.clone(), span));
            }
        }
    }
    (
        StatusCode::OK,
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}

/// An OTLP/HTTP (protobuf) traces receiver on 127.0.0.1; returns its `/v1/traces` URL.
async fn collector() -> (String, Collected) {
    let collected = Collected::default();
    let app = Router::new()
        .route("/v1/traces", post(export))
        .with_state(collected.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the collector");
    let addr = listener.local_addr().expect("collector address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1/traces"), collected)
}

fn string(kv: &KeyValue) -> Option<String> {
    match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

fn attribute(span: &Span, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|AnyValue { value }| value)
}

fn text(span: &Span, key: &str) -> Option<String> {
    match attribute(span, key) {
        Some(Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

fn int(span: &Span, key: &str) -> Option<i64> {
    match attribute(span, key) {
        Some(Value::IntValue(i)) => Some(i),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn a_traced_delivery_is_exported_as_spans_the_receiver_joins() {
    let mut h = Harness::new("otlp-traced").await;
    let (collector_url, collected) = collector().await;
    // A query string on the endpoint's URL (a token) never reaches the collector.
    let url = format!(
        "{}?sig=s3cret-query",
        h.receiver.script("traced", |_| Reply::Status(200))
    );
    h.put_endpoint("ep-traced", serde_json::json!({ "url": url }))
        .await;
    let mut config = h.config();
    config.telemetry.otlp_endpoint = Some(collector_url);
    config.telemetry.service_name = "hookline-e2e".to_owned();
    config.telemetry.headers = BTreeMap::from([(
        "x-collector-token".to_owned(),
        Secret::new("collector-t0ken"),
    )]);
    let group = config.group_id.clone();
    h.start(config).await;
    // Known fast, its records are delivered from the events topic itself.
    h.warm("ep-traced", "traced").await;

    let event = event("ep-traced", 1);
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let producer_span = "00f067aa0ba902b7";
    h.publish_json_traced(&event, &format!("00-{trace}-{producer_span}-01"))
        .await;
    h.wait_for_requests("traced", 2).await;
    let received = h.receiver.received("traced");
    let traceparent = received[1]
        .header("traceparent")
        .expect("a traceparent")
        .to_owned();
    let sent_span = traceparent
        .strip_prefix(&format!("00-{trace}-"))
        .and_then(|rest| rest.strip_suffix("-01"))
        .unwrap_or_else(|| panic!("a child of the event's trace: {traceparent}"))
        .to_owned();

    let (delivery, attempt) = wait_until(DEADLINE, "the delivery's spans exported", || {
        let spans = collected.spans();
        async move {
            let ours: Vec<(String, Span)> = spans
                .into_iter()
                .filter(|(_, span)| hex(&span.trace_id) == trace)
                .collect();
            let delivery = ours.iter().find(|(_, s)| s.name.starts_with("process "))?;
            let attempt = ours.iter().find(|(_, s)| s.name == "POST")?;
            Some((delivery.clone(), attempt.clone()))
        }
    })
    .await;
    let ((service, delivery), (_, attempt)) = (delivery, attempt);
    assert_eq!(service, "hookline-e2e");
    assert_eq!(
        collected
            .tokens
            .lock()
            .expect("tokens")
            .first()
            .map(String::as_str),
        Some("collector-t0ken"),
        "the configured headers go to the collector"
    );

    // The delivery: a consumer span, child of the producer's span.
    assert_eq!(delivery.name, format!("process {}", h.topics.events));
    assert_eq!(delivery.kind, SpanKind::Consumer as i32);
    assert_eq!(hex(&delivery.parent_span_id), producer_span);
    assert_eq!(
        text(&delivery, "messaging.system").as_deref(),
        Some("kafka")
    );
    assert_eq!(
        text(&delivery, "messaging.destination.name"),
        Some(h.topics.events.clone())
    );
    assert_eq!(
        text(&delivery, "messaging.kafka.message.key").as_deref(),
        Some("ep-traced")
    );
    assert!(int(&delivery, "messaging.kafka.offset").is_some_and(|o| o >= 0));
    assert_eq!(
        text(&delivery, "messaging.operation.type").as_deref(),
        Some("process")
    );
    assert_eq!(
        text(&delivery, "messaging.consumer.group.name"),
        Some(group)
    );
    assert_eq!(
        text(&delivery, "webhook.event_id"),
        Some(event.event_id.clone())
    );
    assert_eq!(
        text(&delivery, "webhook.endpoint_id").as_deref(),
        Some("ep-traced")
    );
    assert_eq!(int(&delivery, "webhook.attempt"), Some(1));

    // The attempt: a client span below the delivery, with the id the receiver was sent.
    assert_eq!(attempt.kind, SpanKind::Client as i32);
    assert_eq!(hex(&attempt.span_id), sent_span);
    assert_eq!(attempt.parent_span_id, delivery.span_id);
    assert_eq!(
        text(&attempt, "http.request.method").as_deref(),
        Some("POST")
    );
    let full = text(&attempt, "url.full").expect("url.full");
    assert_eq!(full, format!("{}?redacted", h.receiver.url("traced")));
    assert_eq!(
        text(&attempt, "server.address").as_deref(),
        Some("127.0.0.1")
    );
    let port = url::Url::parse(&url)
        .ok()
        .and_then(|u| u.port())
        .map(i64::from);
    assert_eq!(int(&attempt, "server.port"), port);
    assert_eq!(int(&attempt, "http.response.status_code"), Some(200));
    assert_eq!(text(&attempt, "error.type"), None);
    assert_eq!(int(&attempt, "webhook.attempt"), Some(1));
    for (_, span) in collected.spans() {
        for kv in &span.attributes {
            let value = format!("{:?}", kv.value);
            assert!(!value.contains("s3cret-query"), "{}: {value}", kv.key);
        }
    }
    h.stop().await;
}

#[tokio::test]
async fn deliveries_go_on_when_the_collector_is_down() {
    let mut h = Harness::new("otlp-down").await;
    // A port nobody listens on: every export is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = h.receiver.script("down", |_| Reply::Status(200));
    h.put_endpoint("ep-down", serde_json::json!({ "url": url }))
        .await;
    let mut config = h.config();
    config.telemetry.otlp_endpoint = Some(format!("http://127.0.0.1:{port}/v1/traces"));
    h.start(config).await;
    for n in 0..5 {
        h.publish_json(&event("ep-down", n)).await;
    }
    h.wait_for_requests("down", 5).await;
    h.wait_for_metric(r#"webhook_delivery_total{status="succeeded"}"#, 5)
        .await;
    // Stopping flushes the queued spans to the dead collector, and still ends.
    tokio::time::timeout(DEADLINE, h.stop())
        .await
        .expect("the dispatcher stops with its collector down");
}
