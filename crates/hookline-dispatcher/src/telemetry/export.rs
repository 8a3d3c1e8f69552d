//! The dispatcher's tracer provider: a batch span processor (a bounded queue on its own
//! thread: a full queue drops spans, a delivery never waits for the collector) in front of
//! the OTLP/HTTP exporter, whose failures are logged at most once a minute.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
};

use crate::error::{DispatchError, Result};
use crate::settings::TelemetrySettings;

/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// At most one warning about failed exports per this long.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// A dispatcher's trace export, or none.
#[derive(Clone, Debug, Default)]
pub(crate) struct Telemetry {
    inner: Option<(SdkTracerProvider, SdkTracer)>,
}

impl Telemetry {
    /// Builds the provider for `settings` (`None`: export off).
    pub(crate) fn new(settings: Option<&TelemetrySettings>) -> Result<Self> {
        let Some(settings) = settings else {
            return Ok(Telemetry::default());
        };
        let headers: HashMap<String, String> = settings
            .headers
            .iter()
            .map(|(name, value)| (name.clone(), value.expose().to_owned()))
            .collect();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(settings.endpoint.as_str())
            .with_timeout(EXPORT_TIMEOUT)
            .with_headers(headers)
            .build()
            .map_err(|error| {
                DispatchError::config("telemetry.otlp_endpoint", format!("exporter: {error}"))
            })?;
        let exporter = LoggingExporter {
            inner: exporter,
            collector: hookline_core::url_guard::redact_url(settings.endpoint.as_str()),
            raw: settings.endpoint.to_string(),
            failed: AtomicU64::new(0),
            last_warned: Mutex::new(None),
        };
        let provider = SdkTracerProvider::builder()
            .with_span_processor(BatchSpanProcessor::builder(exporter).build())
            .with_sampler(Sampler::TraceIdRatioBased(settings.sample_ratio))
            .with_resource(
                Resource::builder()
                    .with_service_name(settings.service_name.clone())
                    .build(),
            )
            .build();
        let tracer = provider.tracer("hookline-dispatcher");
        tracing::info!(
            collector = hookline_core::url_guard::redact_url(settings.endpoint.as_str()),
            sample_ratio = settings.sample_ratio,
            "exporting traces"
        );
        Ok(Telemetry {
            inner: Some((provider, tracer)),
        })
    }

    /// The tracer, when export is on.
    pub(crate) fn tracer(&self) -> Option<&SdkTracer> {
        self.inner.as_ref().map(|(_, tracer)| tracer)
    }

    /// Exports what is queued and stops the provider, off the async runtime (it waits for
    /// the export thread, at most the export timeout).
    pub(crate) async fn shutdown(&self) {
        let Some((provider, _)) = self.inner.clone() else {
            return;
        };
        let stopped = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(error)) = stopped {
            tracing::debug!(%error, "stopping the trace export");
        }
    }
}

/// The OTLP exporter, with its failures counted and logged, rate-limited, with the
/// collector's URL redacted.
#[derive(Debug)]
struct LoggingExporter {
    inner: opentelemetry_otlp::SpanExporter,
    collector: String,
    raw: String,
    failed: AtomicU64,
    last_warned: Mutex<Option<Instant>>,
}

impl LoggingExporter {
    fn failed(&self, spans: usize, error: &dyn std::fmt::Display) {
        let dropped = self
            .failed
            .fetch_add(spans as u64, Ordering::Relaxed)
            .saturating_add(spans as u64);
        let now = Instant::now();
        let Ok(mut last) = self.last_warned.lock() else {
            return;
        };
        if last.is_some_and(|at| now.duration_since(at) < WARN_EVERY) {
            return;
        }
        *last = Some(now);
        drop(last);
        self.failed.store(0, Ordering::Relaxed);
        let error = error.to_string().replace(&self.raw, &self.collector);
        tracing::warn!(
            collector = self.collector,
            dropped_spans = dropped,
            %error,
            "exporting spans failed; they are dropped (logged at most once a minute)"
        );
    }
}

impl SpanExporter for LoggingExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        if let Err(error) = &result {
            self.failed(spans, error);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
