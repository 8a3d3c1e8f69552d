//! The `[telemetry]` section: trace export as the user configures it.

use std::collections::BTreeMap;

use hookline_core::secret::Secret;
use serde::{Deserialize, Serialize};

/// Trace export (OTLP over HTTP/protobuf). Off unless `otlp_endpoint` is set.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP traces URL, e.g. `http://127.0.0.1:4318/v1/traces` (used
    /// as given, path included). Unset or empty: no spans are exported.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` resource attribute of the exported spans.
    pub service_name: String,
    /// The share of traces exported, 0 to 1, decided from the trace id (so every replica
    /// keeps the same traces, and a delivery keeps all its attempts).
    pub sample_ratio: f64,
    /// Headers sent to the collector (e.g. `authorization`); values are secrets and take
    /// `${env:NAME}`/`${file:PATH}`.
    #[serde(skip_serializing)]
    pub headers: BTreeMap<String, Secret>,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            otlp_endpoint: None,
            service_name: "hookline-dispatcher".to_owned(),
            sample_ratio: 1.0,
            headers: BTreeMap::new(),
        }
    }
}
