//! The spans of a delivery: `process <topic>` (kind CONSUMER, a child of the event's
//! `traceparent`) and, below it, one `POST` (kind CLIENT) per HTTP attempt, whose span id
//! is the parent id sent to the receiver, so that the receiver's spans join the trace.
//! Attribute names follow the OpenTelemetry semantic conventions (messaging, Kafka, HTTP
//! client spans).

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;

use crate::http::Attempt;
use crate::record::SourceRecord;
use hookline_core::classify::AttemptOutcome;

/// The delivery's span (a no-op when export is off).
pub(crate) struct DeliverySpan {
    tracer: Option<SdkTracer>,
    cx: Context,
    /// The event's `traceparent`, when it holds a valid one.
    parent: Option<String>,
}

impl DeliverySpan {
    /// Starts the span of the delivery of `record`, on the trace of its `traceparent`.
    pub(crate) fn start(
        tracer: Option<&SdkTracer>,
        record: &SourceRecord,
        traceparent: Option<&str>,
        group: &str,
    ) -> Self {
        let parent = traceparent
            .filter(|value| hookline_core::trace::trace_id_of(value).is_some())
            .map(str::to_owned);
        let Some(tracer) = tracer else {
            return DeliverySpan {
                tracer: None,
                cx: Context::new(),
                parent,
            };
        };
        let parent_cx = match parent.as_deref().and_then(remote_context) {
            Some(remote) => Context::new().with_remote_span_context(remote),
            None => Context::new(),
        };
        let mut attributes = vec![
            KeyValue::new("messaging.system", "kafka"),
            KeyValue::new("messaging.operation.type", "process"),
            KeyValue::new("messaging.operation.name", "process"),
            KeyValue::new("messaging.destination.name", record.topic.clone()),
            KeyValue::new(
                "messaging.destination.partition.id",
                record.partition.to_string(),
            ),
            KeyValue::new("messaging.consumer.group.name", group.to_owned()),
            KeyValue::new("messaging.kafka.offset", record.offset),
        ];
        if let Some(key) = record.key_str() {
            attributes.push(KeyValue::new("messaging.kafka.message.key", key.to_owned()));
        }
        let span = tracer
            .span_builder(format!("process {}", record.topic))
            .with_kind(SpanKind::Consumer)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent_cx);
        DeliverySpan {
            tracer: Some(tracer.clone()),
            cx: parent_cx.with_span(span),
            parent,
        }
    }

    /// Records an attribute learnt on the way (`webhook.event_id`, ...), built only when the
    /// delivery is traced.
    pub(crate) fn set(&self, attribute: impl FnOnce() -> KeyValue) {
        if self.tracer.is_some() {
            self.cx.span().set_attribute(attribute());
        }
    }

    /// Marks the delivery failed (parked), with a low-cardinality reason.
    pub(crate) fn failed(&self, reason: &'static str) {
        if self.tracer.is_some() {
            let span = self.cx.span();
            span.set_attribute(KeyValue::new("error.type", reason));
            span.set_status(Status::error(reason));
        }
    }

    /// Starts the span of one HTTP attempt of this delivery to `url`.
    pub(crate) fn attempt(&self, url: &str, attempt_no: u32) -> AttemptSpan {
        let Some(tracer) = &self.tracer else {
            return AttemptSpan { cx: None };
        };
        let mut attributes = vec![
            KeyValue::new("http.request.method", "POST"),
            KeyValue::new("url.full", hookline_core::url_guard::redact_url(url)),
            KeyValue::new("webhook.attempt", i64::from(attempt_no)),
        ];
        if let Ok(parsed) = url::Url::parse(url) {
            if let Some(host) = parsed.host_str() {
                attributes.push(KeyValue::new("server.address", host.to_owned()));
            }
            if let Some(port) = parsed.port_or_known_default() {
                attributes.push(KeyValue::new("server.port", i64::from(port)));
            }
        }
        if attempt_no > 1 {
            attributes.push(KeyValue::new(
                "http.request.resend_count",
                i64::from(attempt_no - 1),
            ));
        }
        let span = tracer
            .span_builder("POST")
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(tracer, &self.cx);
        AttemptSpan {
            cx: Some(self.cx.with_span(span)),
        }
    }

    /// The `traceparent` sent with an attempt: the attempt span's own context when export
    /// is on, else a new child of the event's.
    pub(crate) fn traceparent(&self, attempt: &AttemptSpan) -> String {
        match &attempt.cx {
            Some(cx) => {
                let span = cx.span();
                let context = span.span_context();
                // The caller's sampling flag travels on, whatever this export keeps.
                let flags = self
                    .parent
                    .as_deref()
                    .and_then(|value| value.trim().split('-').nth(3))
                    .unwrap_or("01");
                format!("00-{}-{}-{flags}", context.trace_id(), context.span_id())
            }
            None => {
                hookline_core::trace::child_traceparent(self.parent.as_deref(), &mut rand::rng())
            }
        }
    }
}

/// An HTTP attempt's span; it ends with [`AttemptSpan::finish`] (or when dropped).
pub(crate) struct AttemptSpan {
    cx: Option<Context>,
}

impl AttemptSpan {
    /// Records the attempt's result and ends the span.
    pub(crate) fn finish(self, attempt: &Attempt) {
        let Some(cx) = self.cx else {
            return;
        };
        let span = cx.span();
        let error = match attempt.outcome {
            AttemptOutcome::Response { status, .. } => {
                span.set_attribute(KeyValue::new(
                    "http.response.status_code",
                    i64::from(status),
                ));
                (status >= 400).then(|| status.to_string())
            }
            AttemptOutcome::Timeout => Some("timeout".to_owned()),
            AttemptOutcome::Connect => Some("connection_error".to_owned()),
            AttemptOutcome::TooLarge => Some("response_too_large".to_owned()),
        };
        if let Some(error) = error {
            span.set_attribute(KeyValue::new("error.type", error.clone()));
            span.set_status(Status::error(error));
        }
        span.end();
    }
}

/// The remote span context of a valid `traceparent`.
fn remote_context(traceparent: &str) -> Option<SpanContext> {
    let mut parts = traceparent.trim().split('-');
    let _version = parts.next()?;
    let trace_id = TraceId::from_hex(parts.next()?).ok()?;
    let span_id = SpanId::from_hex(parts.next()?).ok()?;
    let flags = u8::from_str_radix(parts.next()?, 16).ok()?;
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    ))
}
