//! End-to-end tests of reading and filtering the DLQ against the real local stack
//! (`deploy/local/stack up`): each test writes its own envelopes to its own topics.

use std::sync::Arc;

use crate::common::{Dlq, HOUR, envelope, spec};
use hookline_core::envelope::ErrorReason;
use hookline_dlq::filter::now_ms;
use hookline_dlq::reader::topic_exists;
use hookline_dlq::{DlqError, DlqReader, FilterSpec, ReadItem, ReadOptions};
use hookline_kafka::{Registry, RegistrySettings};
use hookline_testkit::unique_name;

#[tokio::test]
async fn filters_select_exactly_the_expected_records() {
    let d = Dlq::new("dlq-filters").await;
    let now = now_ms();
    use ErrorReason::*;
    let a_old = d
        .park(
            0,
            &envelope("ep-a", "invoice.paid", RetriesExhausted, now - 3 * HOUR),
        )
        .await;
    let a_new = d
        .park(
            0,
            &envelope(
                "ep-a",
                "invoice.void",
                NonRetryableStatus,
                now - 10 * 60_000,
            ),
        )
        .await;
    let b_mid = d
        .park(
            1,
            &envelope("ep-b", "invoice.paid", RetriesExhausted, now - 90 * 60_000),
        )
        .await;
    let by_id = envelope("ep-c", "user.created", BlockedUrl, now - 60_000);
    let c_new = d.park(1, &by_id).await;
    let junk = d.raw(1, b"{\"not\":\"avro\"}").await;
    let every = {
        let mut v = vec![a_old, a_new, b_mid, c_new, junk];
        v.sort();
        v
    };

    assert_eq!(
        d.select(spec(), false).await,
        every,
        "no filter: all, undecodable included"
    );
    let reasons = FilterSpec {
        reasons: vec!["retries_exhausted".into()],
        ..spec()
    };
    assert_eq!(d.select(reasons, false).await, [a_old, b_mid]);
    let endpoint = FilterSpec {
        endpoints: vec!["ep-a".into()],
        ..spec()
    };
    assert_eq!(d.select(endpoint, false).await, [a_old, a_new]);
    let event_type = FilterSpec {
        event_types: vec!["invoice.paid".into()],
        ..spec()
    };
    assert_eq!(d.select(event_type, false).await, [a_old, b_mid]);
    let event_id = FilterSpec {
        event_ids: vec![by_id.event_id.clone()],
        ..spec()
    };
    assert_eq!(d.select(event_id, false).await, [c_new]);
    let since = FilterSpec {
        since: Some("2h".into()),
        ..spec()
    };
    assert_eq!(d.select(since, false).await, [a_new, b_mid, c_new]);
    let window = FilterSpec {
        since: Some("2h".into()),
        until: Some("5m".into()),
        reasons: vec!["NON_RETRYABLE_STATUS".into()],
        ..spec()
    };
    assert_eq!(d.select(window, false).await, [a_new]);
    let offsets = FilterSpec {
        partitions: vec![1],
        from_offset: Some(c_new.offset),
        ..spec()
    };
    assert_eq!(d.select(offsets, false).await, [c_new, junk]);
    let explicit = FilterSpec {
        records: vec![format!("{a_new},{b_mid}")],
        ..spec()
    };
    assert_eq!(d.select(explicit, false).await, [a_new, b_mid]);

    // The undecodable record is reported with why, not skipped.
    let filter = FilterSpec {
        records: vec![junk.to_string()],
        ..spec()
    }
    .build(now)
    .expect("valid");
    let mut reader = DlqReader::open(
        &d.kafka,
        Arc::clone(&d.registry),
        &d.dlq,
        &filter,
        ReadOptions::default(),
    )
    .await
    .expect("open");
    let mut saw = None;
    while let Some(item) = reader.next().await.expect("read") {
        if let ReadItem::Undecodable(u) = item {
            saw = Some(u.error);
        }
    }
    let why = saw.expect("the undecodable record is reported");
    assert!(why.contains("not Confluent-framed"), "{why}");
}

#[tokio::test]
async fn a_missing_topic_or_an_unreachable_registry_is_a_clear_error_and_creates_nothing() {
    let d = Dlq::new("dlq-errors").await;
    let missing = unique_name("dlq-missing");
    let filter = spec().build(now_ms()).expect("valid");
    let error = DlqReader::open(
        &d.kafka,
        Arc::clone(&d.registry),
        &missing,
        &filter,
        ReadOptions::default(),
    )
    .await
    .err()
    .expect("a missing topic is an error");
    assert!(
        matches!(&error, DlqError::TopicNotFound { topic } if *topic == missing),
        "{error:?}"
    );
    assert!(error.to_string().contains(&missing));
    assert!(
        !topic_exists(&d.kafka, &missing).await.expect("lookup"),
        "reading created nothing"
    );

    // A registry on a port where nothing listens.
    let down = Arc::new(
        Registry::new(&RegistrySettings {
            url: "http://127.0.0.1:9/apis/ccompat/v7".into(),
            timeout_ms: 2_000,
            ..RegistrySettings::default()
        })
        .expect("client"),
    );
    let error = DlqReader::open(&d.kafka, down, &d.dlq, &filter, ReadOptions::default())
        .await
        .err()
        .expect("an unreachable registry is an error");
    assert!(matches!(error, DlqError::Registry { .. }), "{error:?}");
    let cause = std::error::Error::source(&error).map(ToString::to_string);
    assert!(
        cause.as_deref().is_some_and(|c| c.contains("127.0.0.1:9")),
        "{cause:?}"
    );
}

#[tokio::test]
async fn following_yields_records_parked_after_the_start() {
    let d = Dlq::new("dlq-follow").await;
    let first = d
        .park(0, &envelope("ep-a", "t", ErrorReason::BlockedUrl, now_ms()))
        .await;
    let filter = spec().build(now_ms()).expect("valid");
    let options = ReadOptions {
        follow: true,
        ..ReadOptions::default()
    };
    let mut reader = DlqReader::open(&d.kafka, Arc::clone(&d.registry), &d.dlq, &filter, options)
        .await
        .expect("open");
    let mut next = async || {
        tokio::time::timeout(crate::common::DEADLINE, reader.next())
            .await
            .expect("a record before the deadline")
            .expect("read")
            .expect("following never ends")
            .place()
    };
    assert_eq!(next().await, first);
    let later = d
        .park(1, &envelope("ep-b", "t", ErrorReason::BlockedUrl, now_ms()))
        .await;
    assert_eq!(next().await, later);
}
