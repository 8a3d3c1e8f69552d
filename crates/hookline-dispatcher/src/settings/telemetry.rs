//! The `[telemetry]` section's validation into [`TelemetrySettings`].

use std::collections::BTreeMap;

use hookline_core::secret::Secret;
use reqwest::header::{HeaderName, HeaderValue};

use crate::config::TelemetryConfig;
use crate::error::{DispatchError, Result};

/// Validated trace export settings.
#[derive(Clone, Debug)]
pub struct TelemetrySettings {
    /// The collector's traces URL.
    pub endpoint: url::Url,
    /// `service.name`.
    pub service_name: String,
    /// The share of traces exported.
    pub sample_ratio: f64,
    /// Headers for the collector.
    pub headers: BTreeMap<String, Secret>,
}

impl TelemetryConfig {
    /// The settings, `None` when export is off; a bad value is refused naming its field
    /// (never a header's value).
    pub(crate) fn to_settings(&self) -> Result<Option<TelemetrySettings>> {
        let Some(endpoint) = self
            .otlp_endpoint
            .as_deref()
            .filter(|e| !e.trim().is_empty())
        else {
            return Ok(None);
        };
        let redacted = hookline_core::url_guard::redact_url(endpoint);
        let endpoint = url::Url::parse(endpoint.trim()).map_err(|error| {
            DispatchError::config("telemetry.otlp_endpoint", format!("{redacted}: {error}"))
        })?;
        if !matches!(endpoint.scheme(), "http" | "https") || endpoint.host_str().is_none() {
            return Err(DispatchError::config(
                "telemetry.otlp_endpoint",
                format!("{redacted}: must be an http or https URL with a host"),
            ));
        }
        if !endpoint.username().is_empty() || endpoint.password().is_some() {
            return Err(DispatchError::config(
                "telemetry.otlp_endpoint",
                "must not hold credentials: put them in telemetry.headers",
            ));
        }
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return Err(DispatchError::config(
                "telemetry.sample_ratio",
                "must be between 0 and 1",
            ));
        }
        if self.service_name.trim().is_empty() {
            return Err(DispatchError::config(
                "telemetry.service_name",
                "must not be empty",
            ));
        }
        for (name, value) in &self.headers {
            if HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(DispatchError::config(
                    "telemetry.headers",
                    format!("{name:?} is not a valid header name"),
                ));
            }
            if HeaderValue::from_str(value.expose()).is_err() {
                return Err(DispatchError::config(
                    &format!("telemetry.headers.{name}"),
                    "is not a valid header value",
                ));
            }
        }
        Ok(Some(TelemetrySettings {
            endpoint,
            service_name: self.service_name.clone(),
            sample_ratio: self.sample_ratio,
            headers: self.headers.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_endpoint(endpoint: &str) -> TelemetryConfig {
        TelemetryConfig {
            otlp_endpoint: Some(endpoint.to_owned()),
            ..TelemetryConfig::default()
        }
    }

    #[test]
    fn export_is_off_unless_an_endpoint_is_set() {
        let off = TelemetryConfig::default().to_settings().expect("valid");
        assert!(off.is_none());
        let empty = with_endpoint(" ").to_settings().expect("valid");
        assert!(empty.is_none());
        let on = with_endpoint("http://127.0.0.1:4318/v1/traces")
            .to_settings()
            .expect("valid")
            .expect("on");
        assert_eq!(on.endpoint.path(), "/v1/traces");
        assert_eq!(on.service_name, "hookline-dispatcher");
        assert!((on.sample_ratio - 1.0).abs() < f64::EPSILON);
    }

    #[test]
    fn bad_values_name_their_field_and_never_a_secret() {
        let cases: Vec<(TelemetryConfig, &str)> = vec![
            (with_endpoint("not a url"), "telemetry.otlp_endpoint"),
            (
                with_endpoint("ftp://collector/v1/traces"),
                "telemetry.otlp_endpoint",
            ),
            (
                with_endpoint("http://user:hunter2@collector/"),
                "telemetry.otlp_endpoint",
            ),
            (
                TelemetryConfig {
                    sample_ratio: 1.5,
                    ..with_endpoint("http://collector:4318/v1/traces")
                },
                "telemetry.sample_ratio",
            ),
            (
                TelemetryConfig {
                    sample_ratio: f64::NAN,
                    ..with_endpoint("http://collector:4318/v1/traces")
                },
                "telemetry.sample_ratio",
            ),
            (
                TelemetryConfig {
                    service_name: String::new(),
                    ..with_endpoint("http://collector:4318/v1/traces")
                },
                "telemetry.service_name",
            ),
            (
                TelemetryConfig {
                    headers: BTreeMap::from([(
                        "authorization".to_owned(),
                        Secret::new("Bearer hunter2\n"),
                    )]),
                    ..with_endpoint("http://collector:4318/v1/traces")
                },
                "telemetry.headers.authorization",
            ),
        ];
        for (config, field) in cases {
            let error = config.to_settings().expect_err(field).to_string();
            assert!(error.contains(field), "{error}");
            assert!(!error.contains("hunter2"), "{error}");
        }
    }
}
