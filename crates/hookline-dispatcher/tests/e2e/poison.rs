//! Poison records written with raw clients (kcat, rdkafka) that hookline's own producer would
//! refuse, ahead of good records on one partition: the dispatcher stays up, each poison record
//! is parked with a reason, the good ones are delivered, and the committed offset moves past
//! all of them.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use hookline_core::envelope::ErrorReason;
use hookline_testkit::{Reply, unique_name, wait_until};
use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

use crate::harness::{DEADLINE, Harness, event};

/// Writes one record to partition 0 with kcat, with extra kcat arguments.
fn kcat(h: &Harness, key: &str, value: &[u8], extra: &[&OsStr]) {
    let mut child = Command::new("kcat")
        .args([
            "-P",
            "-b",
            &h.kafka.bootstrap_servers,
            "-t",
            &h.topics.events,
            "-p",
            "0",
        ])
        .args(["-k", key])
        .args(extra)
        .stdin(Stdio::piped())
        .spawn()
        .expect("kcat is installed (deploy/setup installs it)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(value)
        .expect("write to kcat");
    let status = child.wait().expect("kcat ran");
    assert!(status.success(), "kcat {extra:?} failed");
}

/// A producer that writes what hookline's would refuse (large records).
fn raw_producer(h: &Harness) -> FutureProducer {
    let mut config = h.kafka.client_config();
    config.set("message.max.bytes", "3000000");
    config.create().expect("raw producer")
}

async fn send(producer: &FutureProducer, record: FutureRecord<'_, str, [u8]>) -> i64 {
    producer
        .send(record, DEADLINE)
        .await
        .expect("record written")
        .offset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn poison_records_are_parked_with_reasons_and_never_stop_the_partition() {
    let mut h = Harness::new("poison").await;
    let url = h.receiver.script("ok", |_| Reply::Status(204));
    h.put_endpoint("ep-ok", serde_json::json!({ "url": url }))
        .await;
    // The main topic takes records up to 3 MB, as a topic may; the dispatcher's producer
    // keeps librdkafka's 1,000,000-byte limit.
    let admin: AdminClient<DefaultClientContext> =
        h.kafka.client_config().create().expect("admin client");
    let alter = AlterConfig::new(ResourceSpecifier::Topic(&h.topics.events))
        .set("max.message.bytes", "3000000");
    admin
        .alter_configs(&[alter], &AdminOptions::new())
        .await
        .expect("alter topic config");
    let raw = raw_producer(&h);

    let mut good = Vec::new();
    let mut expect_parked: HashMap<&str, ErrorReason> = HashMap::new();
    let mut offsets: HashMap<&str, i64> = HashMap::new();
    let good_event = |n: usize| event("ep-ok", n);

    let publish_good = async |n: usize, good: &mut Vec<String>| {
        let event = good_event(n);
        let value = event.to_json();
        let record = FutureRecord::to(&h.topics.events)
            .partition(0)
            .key("ep-ok")
            .payload(value.as_slice());
        send(&raw, record).await;
        good.push(event.event_id);
    };

    publish_good(0, &mut good).await;
    // 1. A header name that is not UTF-8 (rdkafka's header accessor panics on it).
    let header = OsStr::from_bytes(b"\xff\xfe=1");
    kcat(
        &h,
        "ep-ok",
        &good_event(101).to_json(),
        &[OsStr::new("-H"), header],
    );
    expect_parked.insert("non_utf8_header", ErrorReason::MalformedEvent);
    publish_good(1, &mut good).await;

    // 2. Avro with a recursive writer schema and a value nested 600,000 deep (apache-avro
    // would recurse until the stack overflows).
    let node =
        r#"{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]}]}"#;
    let subject = format!("{}-node-value", unique_name("poison"));
    let id = h
        .registry
        .register(&subject, node)
        .await
        .expect("register Node");
    let datum = [vec![0x02u8; 600_000], vec![0x00]].concat();
    let value = hookline_core::framing::frame(id, &datum);
    let record = FutureRecord::to(&h.topics.events)
        .partition(0)
        .key("ep-ok")
        .payload(value.as_slice());
    offsets.insert("recursive", send(&raw, record).await);
    expect_parked.insert("recursive", ErrorReason::MalformedEvent);
    publish_good(2, &mut good).await;

    // 3. A 1.5 MB event: over the payload limit, and its envelope over the producer's.
    let mut large = good_event(102);
    large.payload = format!(r#"{{"blob":"{}"}}"#, "a".repeat(1_500_000)).into_bytes();
    let value = large.to_json();
    let record = FutureRecord::to(&h.topics.events)
        .partition(0)
        .key("ep-ok")
        .payload(value.as_slice());
    offsets.insert("large", send(&raw, record).await);
    expect_parked.insert("large", ErrorReason::PayloadTooLarge);
    publish_good(3, &mut good).await;

    // 4. A zstd-compressed batch (a common Java producer setting): a good event.
    let zstd = good_event(103);
    kcat(
        &h,
        "ep-ok",
        &zstd.to_json(),
        &[OsStr::new("-z"), OsStr::new("zstd")],
    );
    good.push(zstd.event_id.clone());
    publish_good(4, &mut good).await;

    // 5. Forged retry state on the main topic: due in a century, attempt counter at its
    // maximum. Ignored there: delivered now, as a first attempt.
    let forged = good_event(104);
    let far = (i64::MAX / 2).to_string();
    let headers = OwnedHeaders::new()
        .insert(Header {
            key: "hookline-due-at",
            value: Some(far.as_str()),
        })
        .insert(Header {
            key: "hookline-attempt",
            value: Some("4294967295"),
        })
        .insert(Header {
            key: "hookline-original-topic",
            value: Some("elsewhere"),
        })
        .insert(Header {
            key: "hookline-original-partition",
            value: Some("0"),
        })
        .insert(Header {
            key: "hookline-original-offset",
            value: Some("0"),
        });
    let value = forged.to_json();
    let record = FutureRecord::to(&h.topics.events)
        .partition(0)
        .key("ep-ok")
        .payload(value.as_slice())
        .headers(headers);
    send(&raw, record).await;
    good.push(forged.event_id.clone());
    publish_good(5, &mut good).await;

    // 6. Garbage bytes.
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let record = FutureRecord::to(&h.topics.events)
        .partition(0)
        .key("ep-ok")
        .payload(garbage.as_slice());
    offsets.insert("garbage", send(&raw, record).await);
    expect_parked.insert("garbage", ErrorReason::MalformedEvent);
    publish_good(6, &mut good).await;
    // The last record: the committed offset must pass it.
    let final_event = good_event(7);
    let value = final_event.to_json();
    let record = FutureRecord::to(&h.topics.events)
        .partition(0)
        .key("ep-ok")
        .payload(value.as_slice());
    let last = send(&raw, record).await;
    good.push(final_event.event_id.clone());

    let config = h.config();
    let group = config.group_id.clone();
    h.start(config).await;

    // Every good record arrives once, the forged one as a first attempt.
    wait_until(DEADLINE, "every good record delivered", || async {
        (h.receiver.count("ok") >= good.len()).then_some(())
    })
    .await;
    let received = h.receiver.received("ok");
    for id in &good {
        let copies: Vec<_> = received
            .iter()
            .filter(|r| r.header("webhook-id") == Some(id))
            .collect();
        assert_eq!(copies.len(), 1, "{id} delivered once");
    }
    let forged_request = received
        .iter()
        .find(|r| r.header("webhook-id") == Some(&forged.event_id))
        .expect("the forged record delivered");
    assert_eq!(forged_request.header("webhook-attempt"), Some("1"));

    // Each poison record is parked with its reason.
    let parked = h.dlq(expect_parked.len()).await;
    assert_eq!(
        parked.len(),
        expect_parked.len(),
        "one envelope per poison record"
    );
    let reason_at = |offset: i64| {
        parked
            .iter()
            .find(|(e, _)| e.original_offset == offset)
            .map(|(e, _)| e.error_reason)
    };
    for name in ["recursive", "large", "garbage"] {
        assert_eq!(
            reason_at(offsets[name]),
            Some(expect_parked[name]),
            "{name} parked with its reason"
        );
    }
    let bad_header_envelope = parked
        .iter()
        .find(|(e, _)| e.error_message.contains("not UTF-8"))
        .expect("the record with a non-UTF-8 header name is parked");
    assert_eq!(
        bad_header_envelope.0.error_reason,
        ErrorReason::MalformedEvent
    );
    let (large_envelope, _) = parked
        .iter()
        .find(|(e, _)| e.original_offset == offsets["large"])
        .expect("the large record is parked");
    assert!(
        large_envelope.original_payload_truncated,
        "its payload was cut to fit"
    );
    assert_eq!(
        large_envelope.original_payload_size,
        Some(u64::try_from(large.to_json().len()).expect("size")),
        "and its full size is recorded"
    );

    // The group's committed offset moves past every record, and the dispatcher is up.
    let mut config = h.kafka.client_config();
    config.set("group.id", &group);
    let reader: BaseConsumer = config.create().expect("offset reader");
    let mut list = TopicPartitionList::new();
    list.add_partition(&h.topics.events, 0);
    wait_until(
        DEADLINE,
        "the committed offset passes every record",
        || async {
            let committed = reader
                .committed_offsets(list.clone(), Duration::from_secs(5))
                .ok()?;
            let offset = committed.elements().first()?.offset();
            (offset == Offset::Offset(last + 1)).then_some(())
        },
    )
    .await;
    assert!(
        h.running.as_ref().is_some_and(|r| r.is_ready()),
        "still ready"
    );
    h.stop().await;
}
