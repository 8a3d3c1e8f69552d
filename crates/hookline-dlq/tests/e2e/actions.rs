//! End-to-end tests of resolving, noting and archiving DLQ records against the real local
//! stack (`deploy/local/stack up`): each test writes its own envelopes to its own topics.

use crate::common::{Dlq, envelope, spec};
use hookline_core::envelope::ErrorReason;
use hookline_dlq::archive::{ArchiveWriter, Format, read_archive};
use hookline_dlq::filter::now_ms;
use hookline_dlq::resolve::{Mark, mark};
use hookline_dlq::{ActionKind, FilterSpec, Status};

#[tokio::test]
async fn resolve_hides_records_and_inspect_shows_their_history() {
    let d = Dlq::new("dlq-resolve").await;
    let now = now_ms();
    let first = d
        .park(
            0,
            &envelope("ep-a", "t", ErrorReason::RetriesExhausted, now),
        )
        .await;
    let second = d
        .park(
            0,
            &envelope("ep-b", "t", ErrorReason::RetriesExhausted, now),
        )
        .await;
    let only_a = FilterSpec {
        endpoints: vec!["ep-a".into()],
        ..spec()
    }
    .build(now)
    .expect("valid");

    let dry = mark(
        d.sources(),
        only_a.clone(),
        Mark::Resolve,
        Some("x"),
        ("carol", None),
        true,
    )
    .await
    .expect("dry run");
    assert_eq!(dry.marked, [first]);
    assert_eq!(
        d.select(spec(), false).await,
        [first, second],
        "a dry run records nothing"
    );

    let done = mark(
        d.sources(),
        only_a.clone(),
        Mark::Resolve,
        Some("receiver retired"),
        ("carol", None),
        false,
    )
    .await
    .expect("resolve");
    assert_eq!(done.marked, [first]);
    assert_eq!(
        d.select(spec(), false).await,
        [second],
        "resolved records are hidden"
    );
    assert_eq!(
        d.select(spec(), true).await,
        [first, second],
        "and shown with --all"
    );

    let again = mark(
        d.sources(),
        only_a.clone(),
        Mark::Resolve,
        Some("again"),
        ("carol", None),
        false,
    )
    .await
    .expect("resolve");
    assert!(again.marked.is_empty());
    assert_eq!(again.skipped_handled, 1);
    mark(
        d.sources(),
        only_a,
        Mark::Note,
        Some("ticket OPS-1"),
        ("dave", None),
        false,
    )
    .await
    .expect("note");

    let all = d.selected(true).await;
    let resolved = all
        .iter()
        .find(|s| s.record.place() == first)
        .expect("first");
    assert_eq!(
        resolved.status(),
        Status::Resolved,
        "a note keeps the status"
    );
    let history: Vec<_> = resolved
        .history
        .0
        .iter()
        .map(|a| (a.action, a.by.as_str(), a.note.as_deref()))
        .collect();
    assert_eq!(
        history,
        [
            (ActionKind::Resolved, "carol", Some("receiver retired")),
            (ActionKind::Note, "dave", Some("ticket OPS-1")),
        ]
    );
}

#[tokio::test]
async fn archives_round_trip_in_both_formats() {
    let d = Dlq::new("dlq-archive").await;
    let now = now_ms();
    let mut binary = envelope("ep-a", "t", ErrorReason::MalformedEvent, now);
    binary.original_payload_bytes = vec![0, 0, 0, 0, 42, 0xff, 0x00];
    binary.original_key = None;
    d.park(0, &binary).await;
    let first = d
        .park(
            1,
            &envelope("ep-b", "t", ErrorReason::RetriesExhausted, now),
        )
        .await;
    let only_b = FilterSpec {
        records: vec![first.to_string()],
        ..spec()
    }
    .build(now)
    .expect("valid");
    mark(
        d.sources(),
        only_b,
        Mark::Note,
        Some("kept for the audit"),
        ("erin", None),
        false,
    )
    .await
    .expect("note");

    let records = d.selected(true).await;
    assert_eq!(records.len(), 2);
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, format) in [("dlq.avro", Format::Avro), ("dlq.jsonl", Format::Jsonl)] {
        let path = dir.path().join(name);
        let writer = ArchiveWriter::create(&path, format, &d.dlq).expect("create");
        for r in records.clone() {
            writer.write(r).await.expect("write");
        }
        assert_eq!(writer.finish().await.expect("finish"), 2);
        assert_eq!(
            read_archive(&path).await.expect("read back"),
            records,
            "{name}"
        );
    }
}
