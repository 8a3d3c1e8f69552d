//! Avro "bombs" written with a raw client ahead of good events: small records that claim
//! millions of items. `hookline dispatch` runs as a process under an address-space cap,
//! parks each with its reason, stays up with its peak memory far below what decoding them
//! would take, and delivers every event after them once.

use std::collections::HashMap;
use std::time::Duration;

use hookline_core::envelope::{DlqEnvelope, ErrorReason};
use hookline_core::framing::frame;
use hookline_kafka::Registry;
use hookline_testkit::{
    Receiver, Reply, TestTopics, bombs, kafka_settings, read_all, registry_settings, unique_name,
    wait_until,
};
use rdkafka::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};

use crate::dispatch;

const DEADLINE: Duration = Duration::from_secs(90);
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The dispatcher's address space: what a tokio, rdkafka and mimalloc process reserves, with
/// room; the reviewer's bomb needed more than this and aborted.
const ADDRESS_SPACE_CAP: u64 = 6 << 30;
/// The most resident memory the dispatcher may have reached: a few times what it needs
/// idle, far below the gigabytes the bombs decode into.
const PEAK_RSS_CAP_KIB: u64 = 512 << 10;

/// The peak resident memory of process `pid`, in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmHWM line")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn avro_bombs_are_parked_and_the_dispatcher_stays_up_with_bounded_memory() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("bomb", &["200ms"]);
    topics.create(&kafka, 1).await;
    let receiver = Receiver::start().await;
    let url = receiver.script("ok", |_| Reply::Status(204));
    let producer: FutureProducer = kafka.producer_config().create().expect("producer");
    let send = async |topic: &str, key: &str, value: &[u8]| {
        producer
            .send(
                FutureRecord::to(topic).partition(0).key(key).payload(value),
                DEADLINE,
            )
            .await
            .expect("record written")
            .offset
    };
    let endpoint = serde_json::json!({ "url": url, "secrets": [SECRET] }).to_string();
    send(&topics.endpoints, "ep-ok", endpoint.as_bytes()).await;

    let registry = Registry::new(&registry_settings()).expect("registry");
    let subject = |name: &str| format!("{}-{name}-value", unique_name("bomb"));
    // 1. The reviewer's bomb: 20,000 arrays of 290,000 nulls (which take no bytes), 80 KB.
    // 2. Its shape with items of one byte, which the schema check lets through: 9,000
    // arrays of 100 booleans, 920 KB of datum, over 50 MB decoded.
    let id = registry
        .register(&subject("nulls"), bombs::NULLS_SCHEMA)
        .await
        .expect("registered");
    let ones_id = registry
        .register(&subject("booleans"), bombs::BOOLEANS_SCHEMA)
        .await
        .expect("registered");
    let (bomb, ones) = (bombs::nulls_bomb(), bombs::booleans_bomb());

    let mut good = Vec::new();
    let mut parked = HashMap::new();
    let event = |n: usize| {
        serde_json::json!({
            "event_id": unique_name(&format!("evt-{n}")), "event_type": "invoice.paid",
            "endpoint_id": "ep-ok", "payload": { "n": n },
        })
    };
    for (n, (name, value)) in [
        ("nulls", frame(id, &bomb)),
        ("booleans", frame(ones_id, &ones)),
    ]
    .into_iter()
    .enumerate()
    {
        let offset = send(&topics.events, "ep-ok", &value).await;
        parked.insert(offset, name);
        let event = event(n);
        send(&topics.events, "ep-ok", event.to_string().as_bytes()).await;
        good.push(event["event_id"].as_str().expect("an id").to_owned());
    }

    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("dispatcher.toml");
    let group = unique_name("bomb-group");
    let tiers = topics.tiers_toml();
    std::fs::write(
        &config,
        format!(
            "group_id = \"{group}\"\nshutdown_grace_ms = 5000\n\n[topics]\n\
             retry_tiers = [{tiers}]\n\n[retry]\nbase_ms = 100\ncap_ms = 200\n\n[outbound]\nallow_loopback = true\n\n\
             [admin]\nlisten = \"127.0.0.1:0\"\n"
        ),
    )
    .expect("config file");
    // An address-space cap (util-linux's prlimit, which execs the dispatcher).
    let cap = format!("--as={ADDRESS_SPACE_CAP}");
    let prlimit = ["prlimit", cap.as_str(), "--"];
    let mut child =
        dispatch::dispatcher_under(&prlimit, "dispatcher", &topics, &config, dir.path());
    let pid = child.id().expect("running");

    // Each bomb is parked as a malformed event, saying why.
    let records = read_all(&kafka, &topics.dlq, parked.len(), DEADLINE).await;
    let mut reasons = HashMap::new();
    for record in &records {
        let value = registry
            .decode(record.payload().expect("a DLQ value"))
            .await
            .expect("an envelope");
        let envelope = DlqEnvelope::from_avro_value(value).expect("an envelope");
        assert_eq!(envelope.error_reason, ErrorReason::MalformedEvent);
        let name = parked[&envelope.original_offset];
        reasons.insert(name, envelope.error_message);
    }
    assert!(reasons["nulls"].contains("zero bytes"), "{reasons:?}");
    assert!(
        reasons["booleans"].contains("the most one record may"),
        "{reasons:?}"
    );

    // The events after them are delivered once each, by a dispatcher that stayed up.
    wait_until(DEADLINE, "every good event delivered", || async {
        (receiver.count("ok") >= good.len()).then_some(())
    })
    .await;
    let received = receiver.received("ok");
    for id in &good {
        let copies = received
            .iter()
            .filter(|r| r.header("webhook-id") == Some(id))
            .count();
        assert_eq!(copies, 1, "{id} delivered once");
    }
    assert!(
        child.try_wait().expect("status").is_none(),
        "the dispatcher is still running (log: {})",
        std::fs::read_to_string(dir.path().join("dispatcher.log")).unwrap_or_default()
    );
    // prlimit execs the dispatcher, so its pid is the dispatcher's.
    let peak = peak_rss_kib(pid);
    assert!(
        peak < PEAK_RSS_CAP_KIB,
        "peak RSS {peak} KiB, over {PEAK_RSS_CAP_KIB} KiB"
    );
    dispatch::terminate(&mut child).await;
}
