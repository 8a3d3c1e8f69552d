use std::sync::Arc;

use hookline_core::envelope::ErrorReason;

use super::*;

fn published(id: &str, endpoint: &str, partition: i32, at: f64) -> Published {
    Published {
        id: id.to_owned(),
        endpoint: endpoint.to_owned(),
        partition,
        at,
        expect: Expect::Deliver,
        key: None,
    }
}

fn request(id: &str, attempt: u32, at: f64, answer: Answer, agent: &str) -> Request {
    Request {
        endpoint: Arc::from("ok"),
        id: id.to_owned(),
        attempt,
        at,
        answered_at: at + 0.01,
        answer,
        signature_ok: true,
        agent: agent.to_owned(),
    }
}

fn ok(id: &str, at: f64) -> Request {
    request(id, 1, at, Answer::Status(204), "r1")
}

fn parked(event_id: &str, key: Option<&str>, reason: ErrorReason, at: f64) -> Parked {
    Parked {
        event_id: event_id.to_owned(),
        key: key.map(str::to_owned),
        reason,
        at,
        attempts: 1,
        message: String::new(),
        original: "t/0/0".to_owned(),
    }
}

fn span(start: f64, end: Option<f64>) -> Span {
    Span { start, end }
}

#[test]
fn percentiles_by_nearest_rank() {
    let p = Percentiles::of((1..=100).map(f64::from).collect()).unwrap();
    assert_eq!((p.count, p.p50, p.p99, p.max), (100, 50.0, 99.0, 100.0));
    let one = Percentiles::of(vec![0.25]).unwrap();
    assert_eq!((one.p50, one.p99, one.max), (0.25, 0.25, 0.25));
    assert_eq!(Percentiles::of(Vec::new()), None);
}

#[test]
fn a_stall_is_time_with_work_waiting_and_none_finishing() {
    // Steady progress, then one event that waits 5 s with nothing else finishing.
    let spans = [
        span(0.0, Some(0.1)),
        span(1.0, Some(1.1)),
        span(2.0, Some(7.0)),
    ];
    let stall = longest_stall(&spans, (0.0, 100.0));
    assert!((stall.seconds - 5.0).abs() < 1e-9, "{stall:?}");
    assert!((stall.from - 2.0).abs() < 1e-9);
}

#[test]
fn progress_of_others_breaks_a_stall() {
    // A waits 10 s, but B finishes at 1.5: the stall runs from 1.5 to 10.
    let spans = [span(0.0, Some(10.0)), span(1.0, Some(1.5))];
    let stall = longest_stall(&spans, (0.0, 100.0));
    assert!((stall.seconds - 8.5).abs() < 1e-9, "{stall:?}");
    assert!((stall.from - 1.5).abs() < 1e-9);
}

#[test]
fn nothing_outstanding_is_no_stall() {
    let spans = [span(0.0, Some(1.0)), span(5.0, Some(5.5))];
    let stall = longest_stall(&spans, (0.0, 100.0));
    assert!((stall.seconds - 1.0).abs() < 1e-9, "{stall:?}");
    assert_eq!(longest_stall(&[], (0.0, 10.0)), Stall::default());
}

#[test]
fn an_event_delivered_before_its_publisher_heard_back_is_finished() {
    let spans = [span(1.0, Some(1.2)), span(5.0, Some(4.9))];
    assert!((longest_stall(&spans, (0.0, 100.0)).seconds - 0.2).abs() < 1e-9);
}

#[test]
fn an_unfinished_event_stalls_to_the_end_and_the_window_clips() {
    let spans = [span(1.0, Some(1.2)), span(2.0, None)];
    let stall = longest_stall(&spans, (0.0, 12.0));
    assert!((stall.seconds - 10.0).abs() < 1e-9, "{stall:?}");
    let clipped = longest_stall(&spans, (5.0, 8.0));
    assert!((clipped.seconds - 3.0).abs() < 1e-9, "{clipped:?}");
    assert!((clipped.from - 5.0).abs() < 1e-9);
}

#[test]
fn lateness_counts_from_the_previous_answer_plus_the_backoff() {
    let mut first = request("a", 1, 10.0, Answer::Status(503), "r1");
    first.answered_at = 10.0;
    let mut hung = request("b", 1, 10.0, Answer::Hang, "r1");
    hung.answered_at = 12.0;
    let requests = [
        first,
        request("a", 2, 11.25, Answer::Status(204), "r1"),
        hung,
        request("b", 2, 13.5, Answer::Status(204), "r1"),
        // A second attempt whose first was refused (never seen): not counted.
        request("c", 2, 20.0, Answer::Status(204), "r1"),
    ];
    let mut late = lateness(&requests, 1.0);
    late.sort_by(f64::total_cmp);
    assert_eq!(late.len(), 2);
    assert!(
        (late[0] - 0.25).abs() < 1e-9 && (late[1] - 0.5).abs() < 1e-9,
        "{late:?}"
    );
}

#[test]
fn lateness_takes_the_latest_earlier_copy_of_the_previous_attempt() {
    let mut early = request("a", 1, 1.0, Answer::Status(503), "r1");
    early.answered_at = 1.0;
    let mut replayed = request("a", 1, 5.0, Answer::Status(503), "r2");
    replayed.answered_at = 5.0;
    let requests = [
        early,
        replayed,
        request("a", 2, 6.1, Answer::Status(204), "r2"),
    ];
    let late = lateness(&requests, 1.0);
    assert_eq!(late.len(), 1);
    assert!((late[0] - 0.1).abs() < 1e-9, "{late:?}");
}

#[test]
fn figures_count_outcomes_duplicates_and_signatures() {
    let mut c = published("c", "ok", 0, 0.0);
    c.expect = Expect::Deliver;
    let mut gone = published("g", "gone", 1, 0.0);
    gone.expect = Expect::Park(ErrorReason::NonRetryableStatus);
    let mut poison = published("p", "ok", 2, 0.0);
    poison.expect = Expect::Park(ErrorReason::MalformedEvent);
    poison.key = Some("poison-1".to_owned());
    let records = [
        published("a", "ok", 0, 0.0),
        published("b", "ok", 1, 0.0),
        c,
        published("d", "ok", 2, 0.0),
        gone,
        poison,
    ];
    let mut forged = ok("a", 1.0);
    forged.signature_ok = false;
    let requests = [
        forged,
        ok("b", 1.1),
        ok("b", 3.0),
        ok("b", 4.0),
        ok("nobody", 2.0),
        request("g", 1, 1.0, Answer::Status(410), "r1"),
    ];
    let envelopes = [
        parked("c", None, ErrorReason::RetriesExhausted, 2.0),
        parked("g", None, ErrorReason::NonRetryableStatus, 1.5),
        // Found by its key: its id could not be read.
        parked(
            "derived-id",
            Some("poison-1"),
            ErrorReason::MalformedEvent,
            1.0,
        ),
    ];
    let healthy = HashSet::from(["ok".to_owned()]);
    let scope = Scope {
        healthy: &healthy,
        lateness: &healthy,
        backoff_s: 1.0,
        end: 10.0,
    };
    let f = figures(&records, &requests, &envelopes, &scope);
    assert_eq!((f.published, f.delivered, f.parked, f.lost), (6, 2, 3, 1));
    assert_eq!(f.lost_ids, ["d"]);
    assert_eq!((f.duplicates, f.duplicate_deliveries), (1, 2));
    assert_eq!(
        (f.bad_signatures, f.unknown_requests, f.requests),
        (1, 1, 6)
    );
    assert_eq!(f.unexpected, 1, "{:?}", f.unexpected_examples);
    assert!(
        f.unexpected_examples[0]
            .starts_with("c: expected delivered, got parked as retries_exhausted")
    );
    assert_eq!(f.parked_by_reason["non_retryable_status"], 1);
    assert_eq!(f.parked_by_reason.values().sum::<usize>(), 3);
    // "d" never finished: the healthy endpoint's events stall from the last finish (c
    // parked at 2.0? no: b's first delivery at 1.1, then c at 2.0) to the end.
    assert!(
        (f.longest_stall.seconds - 8.0).abs() < 1e-9,
        "{:?}",
        f.longest_stall
    );
    let latency = f.latency.unwrap();
    assert_eq!(latency.count, 5);
    assert!((latency.max - 2.0).abs() < 1e-9);
}

#[test]
fn a_departure_names_its_partitions_and_when_they_resumed() {
    let mut records = Vec::new();
    let mut requests = Vec::new();
    // Partitions 0 and 1 are r1's, 2 is r2's; r1 is killed at 10.
    for (n, partition, agent) in [
        (0, 0, "r1"),
        (1, 1, "r1"),
        (2, 2, "r2"),
        (3, 0, "r1"),
        (4, 2, "r2"),
    ] {
        let id = format!("e{n}");
        records.push(published(&id, "ok", partition, 9.0));
        requests.push(request(
            &id,
            1,
            9.5 + f64::from(n) * 0.1,
            Answer::Status(204),
            agent,
        ));
    }
    // After the kill: partition 2 keeps flowing, 1 resumes at 16.5 and 0 at 17 (r3).
    for (n, partition, at, agent) in [
        (5, 2, 11.0, "r2"),
        (6, 1, 16.5, "r3"),
        (7, 0, 17.0, "r3"),
        (8, 2, 14.0, "r2"),
    ] {
        let id = format!("e{n}");
        records.push(published(&id, "ok", partition, 10.5));
        requests.push(request(&id, 1, at, Answer::Status(204), agent));
    }
    let finished = finish_times(&records, &requests, &[]);
    let after = departure(10.0, "r1", &records, &requests, &finished);
    assert_eq!(after.partitions, [0, 1]);
    assert_eq!(after.recent_deliveries, 3);
    assert!(
        (after.resumed_after_s.unwrap() - 7.0).abs() < 1e-9,
        "{after:?}"
    );
    // Partition 2: e5 published 10.5 finished 11.0; e8 published 10.5 finished 14.0: the
    // stall runs from 11.0 to 14.0.
    assert!(
        (after.others_longest_stall_s - 3.0).abs() < 1e-9,
        "{after:?}"
    );
    // Partition 0: e0 and e3 finish by 9.8; e7, published at 10.5, waits until 17.
    let healthy = HashSet::from(["ok".to_owned()]);
    let stalls = partition_stalls(&records, &finished, &healthy, 20.0);
    assert!((stalls[&0] - 6.5).abs() < 1e-9, "{stalls:?}");
    assert!((stalls[&2] - 3.0).abs() < 1e-9, "{stalls:?}");
    assert!(partition_stalls(&records, &finished, &HashSet::new(), 20.0).is_empty());
}

#[test]
fn endpoint_figures_count_answers() {
    let requests = [
        request("a", 1, 1.0, Answer::Reset, "r1"),
        request("a", 2, 2.1, Answer::Status(204), "r1"),
        request("b", 1, 1.0, Answer::Hang, "r1"),
    ];
    let figures = endpoint_figures(&["ok".to_owned(), "none".to_owned()], &requests, 1.0);
    assert_eq!(figures[0].requests, 3);
    assert_eq!(figures[0].answers["reset"], 1);
    assert_eq!(figures[0].answers["204"], 1);
    assert_eq!(figures[0].answers["hang"], 1);
    assert_eq!(figures[0].lateness.unwrap().count, 1);
    assert_eq!(figures[1].requests, 0);
}
