//! Redriving DLQ records: re-publishing each one's original key, value and headers to the
//! main topic or a retry tier, with the same event id, attempts reset and provenance
//! headers; the action is recorded once the re-publish is acknowledged. A record that no
//! longer holds its original bytes (its payload was cut to fit the DLQ) is refused, with
//! the reason, and stays open.
//! This module builds the outgoing records and decides refusals (pure); [`run`] does the I/O.

mod run;

use std::fmt;
use std::time::Duration;

use hookline_core::headers::{DeliveryMeta, PUBLISHED_AT, is_hookline_header};
use hookline_core::policy::{format_suffix, parse_suffix};

pub use run::{RedriveEvent, redrive};

use crate::record::{DlqRecord, RecordRef};

/// Header naming the DLQ record a redrive came from: `<dlq topic>/<partition>/<offset>`.
pub const REDRIVEN_FROM: &str = hookline_core::headers::REDRIVEN_FROM;
/// Header naming who redrove it.
pub const REDRIVEN_BY: &str = "hookline-redriven-by";
/// Header saying when it was redriven, epoch milliseconds.
pub const REDRIVEN_AT: &str = "hookline-redriven-at";

/// Where redriven records go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The main topic, as fresh deliveries.
    Main,
    /// The retry tier with this delay, due after it.
    Tier(Duration),
}

impl Target {
    /// The target for `--to-tier` (`5s`, `1m`...) or the main topic without one.
    pub fn parse(tier: Option<&str>) -> Result<Target, String> {
        match tier {
            None => Ok(Target::Main),
            Some(suffix) => parse_suffix(suffix.trim()).map(Target::Tier).map_err(|e| {
                format!("--to-tier `{suffix}` is not a tier delay such as 5s or 1m: {e}")
            }),
        }
    }

    /// The topic it names, given the events topic.
    pub fn topic(&self, events_topic: &str) -> String {
        match self {
            Target::Main => events_topic.to_owned(),
            Target::Tier(delay) => format!("{events_topic}.retry.{}", format_suffix(*delay)),
        }
    }
}

/// How to redrive.
#[derive(Clone, Debug, PartialEq)]
pub struct RedriveOptions {
    /// Where the records go.
    pub target: Target,
    /// The events topic (the main topic, and the base of the tier names).
    pub events_topic: String,
    /// List what would go, send nothing, record nothing.
    pub dry_run: bool,
    /// At most this many records per second.
    pub rate_per_s: Option<f64>,
    /// Who redrives (headers and actions).
    pub by: String,
    /// The role they act in, recorded with the action (the console's; `None` from the CLI).
    pub role: Option<String>,
}

/// One record a redrive sent (or, in a dry run, would send).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    /// Its place in the DLQ.
    pub place: RecordRef,
    /// Its event id.
    pub event_id: String,
    /// Its endpoint id, when known.
    pub endpoint_id: Option<String>,
    /// Its tenant id, when it has one.
    pub tenant_id: Option<String>,
    /// Where it went, `topic/partition/offset` (the topic alone in a dry run).
    pub target: String,
}

impl Sent {
    fn new(record: &DlqRecord, target: String) -> Sent {
        Sent {
            place: record.place(),
            event_id: record.envelope.event_id.clone(),
            endpoint_id: record.envelope.endpoint_id.clone(),
            tenant_id: record.envelope.tenant_id.clone(),
            target,
        }
    }
}

/// Why a matching record is not redriven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its payload was cut to fit the DLQ (envelope v3 `original_payload_truncated`): what
    /// the envelope holds is not the original value, so re-publishing it would deliver a
    /// different body under the same event id.
    PayloadTruncated {
        /// Bytes of the payload the envelope kept.
        kept: usize,
        /// The original payload's full size, when the envelope records it.
        original_size: Option<u64>,
    },
}

impl Refusal {
    /// Why `record` must not be redriven; `None` when it may be.
    pub fn of(record: &DlqRecord) -> Option<Refusal> {
        let e = &record.envelope;
        e.original_payload_truncated
            .then_some(Refusal::PayloadTruncated {
                kept: e.original_payload_bytes.len(),
                original_size: e.original_payload_size,
            })
    }

    /// A stable snake_case code, for counts and JSON.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::PayloadTruncated { .. } => "payload_truncated",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::PayloadTruncated {
                kept,
                original_size,
            } => {
                write!(f, "its payload was truncated to fit the DLQ ({kept}")?;
                if let Some(size) = original_size {
                    write!(f, " of {size}")?;
                }
                write!(f, " bytes kept), so it cannot be redriven byte for byte")
            }
        }
    }
}

/// A matching record a redrive did not send (nor would, in a dry run), and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// Its place in the DLQ.
    pub place: RecordRef,
    /// Its event id.
    pub event_id: String,
    /// Its endpoint id, when known.
    pub endpoint_id: Option<String>,
    /// Its tenant id, when it has one.
    pub tenant_id: Option<String>,
    /// Why it was not sent.
    pub why: Refusal,
}

impl Refused {
    fn new(record: &DlqRecord, why: Refusal) -> Refused {
        Refused {
            place: record.place(),
            event_id: record.envelope.event_id.clone(),
            endpoint_id: record.envelope.endpoint_id.clone(),
            tenant_id: record.envelope.tenant_id.clone(),
            why,
        }
    }
}

/// What a redrive did (or, in a dry run, would do).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedriveReport {
    /// Records sent (or that would be), in order.
    pub sent: Vec<Sent>,
    /// Matching open records not sent (nor, in a dry run, planned), with why; they stay
    /// open, and no action is recorded for them.
    pub refused: Vec<Refused>,
    /// Matching records skipped because they were already redriven or resolved.
    pub skipped_handled: u64,
    /// Records that could not be decoded, so were not sent.
    pub undecodable: Vec<RecordRef>,
}

/// A record to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// Its topic.
    pub topic: String,
    /// The original key.
    pub key: Option<Vec<u8>>,
    /// The original value, byte for byte.
    pub value: Vec<u8>,
    /// The original headers less hookline's, then the provenance (and, for a tier, the
    /// delivery state of a first attempt due after the tier's delay).
    pub headers: Vec<(String, Vec<u8>)>,
}

/// The re-publish of `record` from `dlq_topic`, made by `by` at `now_ms`. Of hookline's
/// headers only `hookline-published-at` is kept, so that the attempt log still knows when
/// the event was first published.
pub fn outgoing(
    record: &DlqRecord,
    dlq_topic: &str,
    options: &RedriveOptions,
    now_ms: i64,
) -> Outgoing {
    let e = &record.envelope;
    let mut headers: Vec<(String, Vec<u8>)> = e
        .original_headers
        .iter()
        .filter(|h| !is_hookline_header(&h.key) || h.key == PUBLISHED_AT)
        .map(|h| (h.key.clone(), h.value.clone().unwrap_or_default()))
        .collect();
    if let Target::Tier(delay) = options.target {
        // A tier record needs the delivery state; attempts start again from zero.
        let meta = DeliveryMeta {
            due_at_ms: Some(
                now_ms.saturating_add(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX)),
            ),
            ..DeliveryMeta::new(
                e.original_topic.clone(),
                e.original_partition,
                e.original_offset,
            )
        };
        headers.extend(
            meta.to_headers()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v)),
        );
    }
    headers.push((
        REDRIVEN_FROM.to_owned(),
        format!("{dlq_topic}/{}", record.place()).into_bytes(),
    ));
    headers.push((REDRIVEN_BY.to_owned(), options.by.clone().into_bytes()));
    headers.push((REDRIVEN_AT.to_owned(), now_ms.to_string().into_bytes()));
    Outgoing {
        topic: options.target.topic(&options.events_topic),
        key: e.original_key.clone(),
        value: e.original_payload_bytes.clone(),
        headers,
    }
}

/// The smallest redrive rate, records per second: one in 1000 s (as for an endpoint's
/// `rate_limit_per_s`), so that the wait between two records always fits a clock.
pub const MIN_RATE_PER_S: f64 = hookline_core::endpoint::MIN_RATE_PER_S;

/// The wait between two records sent at `rate_per_s`; `None` for a rate that is not a
/// number of at least [`MIN_RATE_PER_S`].
pub(crate) fn rate_interval(rate_per_s: f64) -> Option<Duration> {
    if rate_per_s.is_finite() && rate_per_s >= MIN_RATE_PER_S {
        Duration::try_from_secs_f64(1.0 / rate_per_s).ok()
    } else {
        None
    }
}

/// Parses `--rate`: `N`, `N/s` or `N/m` (records per second or minute), at least
/// [`MIN_RATE_PER_S`].
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let invalid = || {
        format!(
            "--rate `{text}` is not a rate of at least {MIN_RATE_PER_S}/s such as 10/s or 100/m"
        )
    };
    let (number, per) = text.trim().split_once('/').unwrap_or((text.trim(), "s"));
    let n: f64 = number.trim().parse().map_err(|_| invalid())?;
    let per_s = match per.trim() {
        "s" | "sec" => n,
        "m" | "min" => n / 60.0,
        _ => return Err(invalid()),
    };
    match rate_interval(per_s) {
        Some(_) => Ok(per_s),
        None => Err(invalid()),
    }
}

#[cfg(test)]
mod tests {
    use hookline_core::envelope::{DlqHeader, ErrorReason};
    use hookline_core::headers::{ATTEMPT, DUE_AT};

    use super::*;
    use crate::record::fixtures::record;

    fn options(target: Target) -> RedriveOptions {
        RedriveOptions {
            target,
            events_topic: "ev".into(),
            dry_run: false,
            rate_per_s: None,
            by: "alice".into(),
            role: None,
        }
    }

    #[test]
    fn the_main_topic_gets_the_original_bytes_as_a_fresh_delivery() {
        let mut r = record(2, 40, "ep-a", ErrorReason::RetriesExhausted, 1_000);
        r.envelope.original_headers.push(DlqHeader {
            key: "hookline-attempt".into(),
            value: Some(b"3".to_vec()),
        });
        r.envelope.original_headers.push(DlqHeader {
            key: PUBLISHED_AT.into(),
            value: Some(b"500".to_vec()),
        });
        let out = outgoing(&r, "ev.dlq", &options(Target::Main), 9_000);
        assert_eq!(out.topic, "ev");
        assert_eq!(out.key.as_deref(), Some(&b"ep-a"[..]));
        assert_eq!(out.value, r.envelope.original_payload_bytes);
        let names: Vec<&str> = out.headers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "webhook-id",
                PUBLISHED_AT,
                REDRIVEN_FROM,
                REDRIVEN_BY,
                REDRIVEN_AT
            ]
        );
        assert_eq!(out.headers[1].1, b"500", "the first publish time is kept");
        assert_eq!(out.headers[2].1, b"ev.dlq/2/40");
        assert_eq!(out.headers[3].1, b"alice");
        assert_eq!(out.headers[4].1, b"9000");
        // The provenance headers do not make the dispatcher see a retry.
        let meta = DeliveryMeta::from_headers(
            out.headers
                .iter()
                .map(|(k, v)| (k.as_str(), Some(v.as_slice()))),
        );
        assert_eq!(meta, Ok(None));
    }

    #[test]
    fn a_tier_gets_a_first_attempt_due_after_its_delay() {
        let r = record(0, 1, "ep-a", ErrorReason::RetriesExhausted, 1_000);
        let target = Target::parse(Some("5s")).expect("valid");
        let out = outgoing(&r, "ev.dlq", &options(target), 9_000);
        assert_eq!(out.topic, "ev.retry.5s");
        let find = |name: &str| {
            out.headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(find(ATTEMPT), Some(b"0".to_vec()));
        assert_eq!(find(DUE_AT), Some(b"14000".to_vec()));
    }

    #[test]
    fn a_record_with_a_truncated_payload_is_refused_with_why() {
        let mut r = record(1, 5, "ep-a", ErrorReason::PayloadTooLarge, 1_000);
        assert_eq!(Refusal::of(&r), None, "a whole record may be redriven");
        r.envelope.original_payload_bytes.truncate(3);
        r.envelope.original_payload_truncated = true;
        r.envelope.original_payload_size = Some(1_500_000);
        let why = Refusal::of(&r).expect("refused");
        assert_eq!(
            why,
            Refusal::PayloadTruncated {
                kept: 3,
                original_size: Some(1_500_000)
            }
        );
        assert_eq!(why.code(), "payload_truncated");
        assert_eq!(
            why.to_string(),
            "its payload was truncated to fit the DLQ (3 of 1500000 bytes kept), so it cannot be \
             redriven byte for byte"
        );
        let refused = Refused::new(&r, why);
        assert_eq!(refused.place.to_string(), "1/5");
        assert_eq!(refused.endpoint_id.as_deref(), Some("ep-a"));
        r.envelope.original_payload_size = None;
        assert_eq!(
            Refusal::of(&r).expect("refused").to_string(),
            "its payload was truncated to fit the DLQ (3 bytes kept), so it cannot be redriven \
             byte for byte"
        );
    }

    #[test]
    fn targets_and_rates_parse() {
        assert_eq!(Target::parse(None), Ok(Target::Main));
        assert!(Target::parse(Some("soon")).is_err());
        assert_eq!(parse_rate("10/s"), Ok(10.0));
        assert_eq!(parse_rate("5"), Ok(5.0));
        assert_eq!(parse_rate("120/m"), Ok(2.0));
        for bad in ["0", "-1/s", "x/s", "10/h", "inf"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_rate("0.06/m"), Ok(0.001));
    }

    /// Found by `rates_of_any_text`: these parsed, and the redrive then panicked computing
    /// (`1e-300`) or adding (`.1e-18`, a wait of 10^19 s) the wait between two records.
    #[test]
    fn rates_too_small_to_wait_for_are_refused() {
        for bad in [".1e-18", "1e-300", "5e-324/m", "0.0009/s", "0.05/m"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        for bad in [1e-19, 1e-300, f64::NAN, -1.0, f64::INFINITY] {
            assert_eq!(rate_interval(bad), None, "{bad}");
        }
        assert_eq!(rate_interval(1e300), Some(Duration::ZERO));
    }

    proptest::proptest! {
        #![proptest_config(crate::fuzz::config(512))]

        /// Any `--rate` text: a rate that parses paces a redrive (its interval is a duration
        /// that can be waited out).
        #[test]
        fn rates_of_any_text(
            text in proptest::prop_oneof![
                "-?[0-9]{0,12}(\\.[0-9]{0,12})?(e-?[0-9]{1,3})? ?(/ ?(s|sec|m|min|h))?",
                proptest::prelude::any::<String>(),
            ],
        ) {
            if let Ok(rate) = parse_rate(&text) {
                let interval = rate_interval(rate);
                proptest::prop_assert!(interval.is_some(), "{text}: {rate}");
                let now = tokio::time::Instant::now();
                proptest::prop_assert!(now.checked_add(interval.unwrap_or_default()).is_some());
            }
        }
    }
}
