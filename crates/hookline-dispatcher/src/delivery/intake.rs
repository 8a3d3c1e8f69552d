//! Intake: a record's retry state, read once from its headers before it is handed to a
//! task, and honoured only on a tier topic, where hookline wrote it. Pure: the time is
//! passed in.

use hookline_core::decision::{self, Schedule, TakeUp};
use hookline_core::envelope::ErrorReason;
use hookline_core::headers::DeliveryMeta;
use hookline_core::policy::RetryTiers;

use crate::envelope::Failure;
use crate::record::SourceRecord;

/// What intake learns from a record's headers, before it is handed to a task.
#[derive(Debug)]
pub(crate) enum Intake {
    /// Deliver it now, with this retry state.
    Deliver(DeliveryMeta),
    /// A tier record whose attempt is not due yet though its time in the tier is up: write
    /// it again (no attempt).
    Hop(DeliveryMeta, Schedule),
    /// A tier record that is not due: pause its partition until this time (epoch ms).
    NotDue(i64),
    /// Unreadable headers: park it as malformed.
    Malformed(Failure),
}

/// The topics whose records carry a retry state hookline wrote: the tiers and the slow lane.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Written<'a> {
    pub events_topic: &'a str,
    pub tiers: &'a RetryTiers,
    pub lane_topic: &'a str,
}

/// Reads a record's retry state once. On the main topic hookline's delivery headers are
/// ignored (a producer or a replay cannot pause a partition or skip attempts with them); on
/// a tier topic they are honoured, but no due time holds the record longer than the tier's
/// delay; on the slow lane they are honoured and the record is due at once (it waited there
/// for its endpoint's turn, not for a time).
pub(crate) fn intake(record: &SourceRecord, written: Written<'_>, now_ms: i64) -> Intake {
    let Written {
        events_topic,
        tiers,
        lane_topic,
    } = written;
    let fresh = || DeliveryMeta::new(&*record.topic, record.partition, record.offset);
    if let Some(name) = &record.bad_header_name {
        return Intake::Malformed(Failure::new(
            ErrorReason::MalformedEvent,
            format!("a header name is not UTF-8 ({name:?})"),
        ));
    }
    let from_lane = *record.topic == *lane_topic;
    let tier = tiers.tier_of_topic(events_topic, &record.topic);
    if tier.is_none() && !from_lane {
        return Intake::Deliver(fresh());
    }
    let meta = DeliveryMeta::from_headers(
        record
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_deref())),
    );
    let meta = match meta {
        Ok(Some(meta)) => meta,
        Ok(None) => fresh(),
        Err(error) => {
            return Intake::Malformed(Failure::new(
                ErrorReason::MalformedEvent,
                format!("unreadable hookline headers: {error}"),
            ));
        }
    };
    let Some(tier) = tier else {
        return Intake::Deliver(meta);
    };
    match decision::take_up(tiers, tier.delay, meta.due_at_ms, meta.retry_at_ms, now_ms) {
        TakeUp::Now => Intake::Deliver(meta),
        TakeUp::PauseUntil(until) => Intake::NotDue(until),
        TakeUp::Hop(schedule) => Intake::Hop(meta, schedule),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    fn tiers() -> RetryTiers {
        RetryTiers::from_suffixes(&["200ms", "1s"]).expect("tiers")
    }

    fn written(tiers: &RetryTiers) -> Written<'_> {
        Written {
            events_topic: "events",
            tiers,
            lane_topic: "events.lane",
        }
    }

    fn record(topic: &str, headers: &[(&str, &str)]) -> SourceRecord {
        SourceRecord {
            topic: topic.into(),
            partition: 0,
            offset: 7,
            key: Some(b"ep".to_vec()),
            value: Some(b"{}".to_vec()),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Some(v.as_bytes().to_vec())))
                .collect(),
            bad_header_name: None,
        }
    }

    fn retry_headers(due: i64, attempt: &str) -> Vec<(&'static str, String)> {
        vec![
            ("hookline-attempt", attempt.to_owned()),
            ("hookline-due-at", due.to_string()),
            ("hookline-original-topic", "events".to_owned()),
            ("hookline-original-partition", "0".to_owned()),
            ("hookline-original-offset", "3".to_owned()),
        ]
    }

    fn with(topic: &str, headers: &[(&'static str, String)]) -> SourceRecord {
        let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        record(topic, &pairs)
    }

    #[test]
    fn retry_headers_on_the_main_topic_are_ignored() {
        let forged = with("events", &retry_headers(i64::MAX, "4294967295"));
        let Intake::Deliver(meta) = intake(&forged, written(&tiers()), NOW) else {
            panic!("delivered now");
        };
        assert_eq!(meta.attempt, 0, "a first attempt");
        assert_eq!(meta.due_at_ms, None);
        assert_eq!(meta.original_offset, 7, "its own place");
    }

    #[test]
    fn on_a_tier_they_are_honoured_but_never_beyond_the_tier() {
        let due_soon = with("events.retry.1s", &retry_headers(NOW + 500, "2"));
        assert!(matches!(
            intake(&due_soon, written(&tiers()), NOW),
            Intake::NotDue(at) if at == NOW + 500
        ));
        let forged = with("events.retry.1s", &retry_headers(i64::MAX, "2"));
        assert!(matches!(
            intake(&forged, written(&tiers()), NOW),
            Intake::NotDue(at) if at == NOW + 1_000
        ));
        let due = with("events.retry.1s", &retry_headers(NOW - 5, "2"));
        let Intake::Deliver(meta) = intake(&due, written(&tiers()), NOW) else {
            panic!("due: delivered");
        };
        assert_eq!((meta.attempt, meta.original_offset), (2, 3));
    }

    #[test]
    fn on_the_slow_lane_they_are_honoured_and_the_record_is_due_at_once() {
        let laned = with("events.lane", &retry_headers(NOW + 60_000, "2"));
        let Intake::Deliver(meta) = intake(&laned, written(&tiers()), NOW) else {
            panic!("delivered now");
        };
        assert_eq!(
            (meta.attempt, meta.original_offset),
            (2, 3),
            "its own state"
        );
        let unreadable = with("events.lane", &retry_headers(NOW, "-1"));
        assert!(matches!(
            intake(&unreadable, written(&tiers()), NOW),
            Intake::Malformed(_)
        ));
    }

    #[test]
    fn a_long_wait_hops_and_bad_headers_are_malformed() {
        let mut headers = retry_headers(NOW - 5, "1");
        headers.push(("hookline-retry-at", (NOW + 3_600_000).to_string()));
        let long = with("events.retry.1s", &headers);
        let Intake::Hop(_, schedule) = intake(&long, written(&tiers()), NOW) else {
            panic!("a hop");
        };
        assert_eq!(schedule.due_at_ms, NOW + 1_000);

        let unreadable = with("events.retry.1s", &retry_headers(NOW, "-1"));
        assert!(matches!(
            intake(&unreadable, written(&tiers()), NOW),
            Intake::Malformed(_)
        ));
        let mut bad_name = record("events", &[]);
        bad_name.bad_header_name = Some("\u{fffd}\u{fffd}".to_owned());
        let Intake::Malformed(failure) = intake(&bad_name, written(&tiers()), NOW) else {
            panic!("malformed");
        };
        assert_eq!(failure.reason, ErrorReason::MalformedEvent);
        assert!(failure.message.contains("not UTF-8"), "{}", failure.message);
    }
}
