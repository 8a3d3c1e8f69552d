//! Classification of a delivery attempt's outcome: success, retryable or final failure.
//!
//! 2xx succeeds. Timeouts, connection errors, 408, 409, 429, 5xx and odd statuses (1xx, out
//! of range) are retryable: 409 is what an idempotent receiver (`hookline-receiver`) answers
//! to a copy that arrives while the first is still being processed. Redirects are not
//! followed: a 3xx is a final failure. Other 4xx are final by default; [`ClassifyConfig`]
//! changes which statuses are final.

use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::envelope::ErrorReason;

/// What happened to one HTTP delivery attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// The endpoint answered (any status, including 3xx redirects, which are not followed).
    Response {
        /// The HTTP status code.
        status: u16,
        /// The parsed `Retry-After` header, if any (see [`parse_retry_after`]).
        retry_after: Option<Duration>,
    },
    /// No complete answer within the timeout.
    Timeout,
    /// No connection (DNS, TCP, TLS or a reset before an answer).
    Connect,
    /// The response was larger than the read limit before its status could be used.
    TooLarge,
}

/// Why an attempt failed; [`code`](Self::code) is a low-cardinality metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// A 3xx status; redirects are not followed.
    Redirect {
        /// The status.
        status: u16,
    },
    /// 408 Request Timeout.
    RequestTimeout,
    /// 429 Too Many Requests.
    TooManyRequests,
    /// A 4xx status other than 408 and 429 (409 among them: retryable by default, though).
    ClientError {
        /// The status.
        status: u16,
    },
    /// A 5xx status.
    ServerError {
        /// The status.
        status: u16,
    },
    /// A 1xx status or one outside 100..=599.
    UnexpectedStatus {
        /// The status.
        status: u16,
    },
    /// The attempt timed out.
    Timeout,
    /// The connection failed.
    Connect,
    /// The response was over the size limit.
    ResponseTooLarge,
}

impl FailureKind {
    /// A stable snake_case label: `http_3xx`, `http_408`, `http_429`, `http_4xx`,
    /// `http_5xx`, `http_other`, `timeout`, `connect` or `response_too_large`.
    pub fn code(&self) -> &'static str {
        match self {
            FailureKind::Redirect { .. } => "http_3xx",
            FailureKind::RequestTimeout => "http_408",
            FailureKind::TooManyRequests => "http_429",
            FailureKind::ClientError { .. } => "http_4xx",
            FailureKind::ServerError { .. } => "http_5xx",
            FailureKind::UnexpectedStatus { .. } => "http_other",
            FailureKind::Timeout => "timeout",
            FailureKind::Connect => "connect",
            FailureKind::ResponseTooLarge => "response_too_large",
        }
    }

    /// The HTTP status, when the endpoint answered with one.
    pub fn status(&self) -> Option<u16> {
        match *self {
            FailureKind::Redirect { status }
            | FailureKind::ClientError { status }
            | FailureKind::ServerError { status }
            | FailureKind::UnexpectedStatus { status } => Some(status),
            FailureKind::RequestTimeout => Some(408),
            FailureKind::TooManyRequests => Some(429),
            FailureKind::Timeout | FailureKind::Connect | FailureKind::ResponseTooLarge => None,
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureKind::Redirect { status } => {
                write!(f, "HTTP {status} (redirects are not followed)")
            }
            FailureKind::RequestTimeout
            | FailureKind::TooManyRequests
            | FailureKind::ClientError { .. }
            | FailureKind::ServerError { .. }
            | FailureKind::UnexpectedStatus { .. } => {
                write!(f, "HTTP {}", self.status().unwrap_or_default())
            }
            FailureKind::Timeout => f.write_str("request timed out"),
            FailureKind::Connect => f.write_str("connection failed"),
            FailureKind::ResponseTooLarge => f.write_str("response over the size limit"),
        }
    }
}

/// The verdict on one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Classification {
    /// Delivered.
    Success,
    /// Failed; another attempt may succeed.
    Retryable {
        /// Why it failed.
        reason: FailureKind,
        /// How long the endpoint asked to wait, if it did.
        retry_after: Option<Duration>,
    },
    /// Failed for good.
    NonRetryable {
        /// Why it failed.
        reason: FailureKind,
    },
}

impl Classification {
    /// `success`, or the failure's [`FailureKind::code`].
    pub fn code(&self) -> &'static str {
        match self {
            Classification::Success => "success",
            Classification::Retryable { reason, .. } | Classification::NonRetryable { reason } => {
                reason.code()
            }
        }
    }

    /// The DLQ reason when this verdict parks the delivery at once.
    pub fn dlq_reason(&self) -> Option<ErrorReason> {
        match self {
            Classification::NonRetryable { .. } => Some(ErrorReason::NonRetryableStatus),
            Classification::Success | Classification::Retryable { .. } => None,
        }
    }

    /// Whether the answer shows the endpoint up and serving, as its circuit breaker counts:
    /// a success, a final failure, or a retryable 4xx other than 408 and 429 (a 409 from a
    /// receiver still processing another copy). Timeouts, connection errors, 408, 429 and
    /// 5xx count against it.
    pub fn endpoint_alive(&self) -> bool {
        match self {
            Classification::Success | Classification::NonRetryable { .. } => true,
            Classification::Retryable { reason, .. } => {
                matches!(reason, FailureKind::ClientError { .. })
            }
        }
    }
}

/// The 4xx statuses retried by default: 408 Request Timeout, 409 Conflict (a receiver still
/// processing a copy of the same message) and 429 Too Many Requests.
pub const RETRYABLE_4XX: [u16; 3] = [408, 409, 429];

/// Which statuses of 400 and above are final.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassifyConfig {
    /// Statuses (>= 400) that end a delivery at once. Default: every 4xx except 408, 409
    /// and 429.
    pub non_retryable: Vec<u16>,
}

impl Default for ClassifyConfig {
    fn default() -> Self {
        ClassifyConfig {
            non_retryable: (400..=499).filter(|s| !RETRYABLE_4XX.contains(s)).collect(),
        }
    }
}

impl ClassifyConfig {
    /// This config with `statuses` made retryable (e.g. 409, 423, 425).
    pub fn with_retryable(mut self, statuses: &[u16]) -> Self {
        self.non_retryable.retain(|s| !statuses.contains(s));
        self
    }

    /// This config with `statuses` made final (e.g. 501).
    pub fn with_non_retryable(mut self, statuses: &[u16]) -> Self {
        for s in statuses {
            if !self.non_retryable.contains(s) {
                self.non_retryable.push(*s);
            }
        }
        self
    }
}

/// The user-facing form of [`ClassifyConfig`]: changes to the default rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatusConfig {
    /// 4xx statuses to retry besides 408, 409 and 429, e.g. `[423, 425]`.
    pub retryable_4xx: Vec<u16>,
    /// 4xx statuses retried by default that are to be final instead, e.g. `[409]`.
    pub non_retryable_4xx: Vec<u16>,
    /// 5xx statuses that are final, e.g. `[501, 505]`.
    pub non_retryable_5xx: Vec<u16>,
}

/// A [`StatusConfig`] that cannot be used, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid `{field}`: {reason}")]
pub struct StatusConfigError {
    /// The field, with its path.
    pub field: String,
    /// The status that does not belong.
    pub status: u16,
    /// Why, e.g. "404 is not a 5xx status".
    pub reason: String,
}

impl StatusConfig {
    /// Validates and converts, naming fields as `<prefix>.<field>`.
    pub fn to_classify_config(&self, prefix: &str) -> Result<ClassifyConfig, StatusConfigError> {
        let check =
            |field: &str, list: &[u16], range: std::ops::RangeInclusive<u16>, expected| match list
                .iter()
                .find(|s| !range.contains(s))
            {
                Some(&status) => Err(StatusConfigError {
                    field: format!("{prefix}.{field}"),
                    status,
                    reason: format!("{status} is not a {expected} status"),
                }),
                None => Ok(()),
            };
        check("retryable_4xx", &self.retryable_4xx, 400..=499, "4xx")?;
        check(
            "non_retryable_4xx",
            &self.non_retryable_4xx,
            400..=499,
            "4xx",
        )?;
        if let Some(&status) = self
            .non_retryable_4xx
            .iter()
            .find(|s| self.retryable_4xx.contains(s))
        {
            return Err(StatusConfigError {
                field: format!("{prefix}.non_retryable_4xx"),
                status,
                reason: format!("{status} is in retryable_4xx too"),
            });
        }
        check(
            "non_retryable_5xx",
            &self.non_retryable_5xx,
            500..=599,
            "5xx",
        )?;
        Ok(ClassifyConfig::default()
            .with_retryable(&self.retryable_4xx)
            .with_non_retryable(&self.non_retryable_4xx)
            .with_non_retryable(&self.non_retryable_5xx))
    }
}

/// Classifies the outcome of one attempt.
pub fn classify(outcome: AttemptOutcome, config: &ClassifyConfig) -> Classification {
    let (status, retry_after) = match outcome {
        AttemptOutcome::Response {
            status,
            retry_after,
        } => (status, retry_after),
        AttemptOutcome::Timeout => return retryable(FailureKind::Timeout, None),
        AttemptOutcome::Connect => return retryable(FailureKind::Connect, None),
        AttemptOutcome::TooLarge => return retryable(FailureKind::ResponseTooLarge, None),
    };
    let reason = match status {
        200..=299 => return Classification::Success,
        300..=399 => {
            return Classification::NonRetryable {
                reason: FailureKind::Redirect { status },
            };
        }
        408 => FailureKind::RequestTimeout,
        429 => FailureKind::TooManyRequests,
        400..=499 => FailureKind::ClientError { status },
        500..=599 => FailureKind::ServerError { status },
        _ => return retryable(FailureKind::UnexpectedStatus { status }, retry_after),
    };
    if config.non_retryable.contains(&status) {
        Classification::NonRetryable { reason }
    } else {
        retryable(reason, retry_after)
    }
}

fn retryable(reason: FailureKind, retry_after: Option<Duration>) -> Classification {
    Classification::Retryable {
        reason,
        retry_after,
    }
}

/// Parses a `Retry-After` value: delay-seconds (`120`) or an HTTP-date, relative to `now`.
/// A date in the past gives zero; anything else unparseable gives `None`.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<u64>().ok().map(Duration::from_secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(s: u16) -> Classification {
        classify(
            AttemptOutcome::Response {
                status: s,
                retry_after: None,
            },
            &ClassifyConfig::default(),
        )
    }

    #[test]
    fn success_and_redirects() {
        for s in [200, 201, 204, 299] {
            assert_eq!(status(s), Classification::Success);
        }
        for s in [301, 302, 307, 308] {
            assert_eq!(
                status(s),
                Classification::NonRetryable {
                    reason: FailureKind::Redirect { status: s }
                }
            );
        }
        assert_eq!(status(302).code(), "http_3xx");
        assert_eq!(
            status(302).dlq_reason(),
            Some(ErrorReason::NonRetryableStatus)
        );
    }

    #[test]
    fn client_errors_are_final_except_408_409_and_429() {
        for s in [400, 401, 403, 404, 410, 422] {
            assert!(
                matches!(status(s), Classification::NonRetryable { .. }),
                "{s}"
            );
            assert_eq!(status(s).code(), "http_4xx");
        }
        assert_eq!(status(408).code(), "http_408");
        assert!(matches!(status(408), Classification::Retryable { .. }));
        // A receiver still processing another copy of the message answers 409: retry later.
        assert!(
            matches!(status(409), Classification::Retryable { .. }),
            "409 is retried by default"
        );
        assert_eq!(status(409).code(), "http_4xx");
        let limited = classify(
            AttemptOutcome::Response {
                status: 429,
                retry_after: Some(Duration::from_secs(30)),
            },
            &ClassifyConfig::default(),
        );
        assert_eq!(
            limited,
            Classification::Retryable {
                reason: FailureKind::TooManyRequests,
                retry_after: Some(Duration::from_secs(30))
            }
        );
    }

    #[test]
    fn a_409_keeps_the_endpoint_alive_for_its_breaker() {
        assert!(
            status(409).endpoint_alive(),
            "a receiver busy with a copy is up"
        );
        assert!(status(200).endpoint_alive());
        assert!(status(404).endpoint_alive());
        for s in [408, 429, 500, 503] {
            assert!(!status(s).endpoint_alive(), "{s}");
        }
        let cfg = ClassifyConfig::default();
        assert!(!classify(AttemptOutcome::Timeout, &cfg).endpoint_alive());
        assert!(!classify(AttemptOutcome::Connect, &cfg).endpoint_alive());
    }

    #[test]
    fn server_errors_transport_errors_and_odd_statuses_are_retryable() {
        for s in [500, 502, 503, 504, 599, 100, 101, 0, 99, 600, 999] {
            assert!(matches!(status(s), Classification::Retryable { .. }), "{s}");
        }
        assert_eq!(status(503).code(), "http_5xx");
        assert_eq!(status(101).code(), "http_other");
        let cfg = ClassifyConfig::default();
        assert_eq!(classify(AttemptOutcome::Timeout, &cfg).code(), "timeout");
        assert_eq!(classify(AttemptOutcome::Connect, &cfg).code(), "connect");
        assert_eq!(
            classify(AttemptOutcome::TooLarge, &cfg).code(),
            "response_too_large"
        );
        assert_eq!(classify(AttemptOutcome::Timeout, &cfg).dlq_reason(), None);
        assert_eq!(Classification::Success.dlq_reason(), None);
    }

    #[test]
    fn configurable_statuses() {
        let cfg = StatusConfig {
            retryable_4xx: vec![423, 425],
            non_retryable_4xx: vec![409],
            non_retryable_5xx: vec![501],
        }
        .to_classify_config("delivery")
        .expect("valid");
        let at = |s| {
            classify(
                AttemptOutcome::Response {
                    status: s,
                    retry_after: None,
                },
                &cfg,
            )
        };
        assert!(matches!(at(409), Classification::NonRetryable { .. }));
        assert!(matches!(at(423), Classification::Retryable { .. }));
        assert!(matches!(at(425), Classification::Retryable { .. }));
        assert!(matches!(at(408), Classification::Retryable { .. }));
        assert!(matches!(at(404), Classification::NonRetryable { .. }));
        assert!(matches!(at(501), Classification::NonRetryable { .. }));
        assert!(matches!(at(503), Classification::Retryable { .. }));

        let bad = StatusConfig {
            retryable_4xx: vec![503],
            ..StatusConfig::default()
        };
        let err = bad.to_classify_config("delivery").expect_err("invalid");
        assert_eq!(err.field, "delivery.retryable_4xx");
        let both = StatusConfig {
            retryable_4xx: vec![409],
            non_retryable_4xx: vec![409],
            ..StatusConfig::default()
        };
        let err = both
            .to_classify_config("status")
            .expect_err("contradiction");
        assert_eq!(err.field, "status.non_retryable_4xx");
        assert_eq!(
            err.to_string(),
            "invalid `status.non_retryable_4xx`: 409 is in retryable_4xx too"
        );
        assert!(serde_json::from_str::<StatusConfig>(r#"{"retry":[409]}"#).is_err());
    }

    #[test]
    fn failure_kind_text_and_status() {
        assert_eq!(
            FailureKind::ServerError { status: 503 }.to_string(),
            "HTTP 503"
        );
        assert_eq!(FailureKind::TooManyRequests.status(), Some(429));
        assert_eq!(FailureKind::Timeout.status(), None);
        assert!(
            FailureKind::Redirect { status: 301 }
                .to_string()
                .contains("not followed")
        );
    }

    #[test]
    fn retry_after_values() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").expect("date");
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:29:30 GMT", now),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        for bad in ["", "-5", "1.5", "soon", "99999999999999999999999"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad}");
        }
    }
}
