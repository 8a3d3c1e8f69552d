//! Trace export with OTLP (HTTP/protobuf): each delivery and each of its HTTP attempts as
//! OpenTelemetry spans, on the event's W3C trace, batched to a collector by a tracer
//! provider of this dispatcher's own (no global state, so dispatchers in one process keep
//! their own configuration).

mod export;
mod spans;

pub(crate) use export::Telemetry;
pub(crate) use spans::DeliverySpan;
