//! End-to-end tests of a redrive against the real local stack: an in-process dispatcher
//! parks a failing endpoint's deliveries in the DLQ, the endpoint is fixed, and a redrive
//! delivers each one exactly once with its original event id; a second redrive sends nothing.
//! An envelope whose 1.5 MB payload was cut to fit the DLQ (framed with a known schema id,
//! as the dispatcher writes it) is refused by every redrive, dry run included, with why.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_core::envelope::{ErrorReason, Fit};
use hookline_core::schema::{DLQ_ENVELOPE_CURRENT, WEBHOOK_EVENT_CURRENT};
use hookline_dispatcher::{DispatcherConfig, start};
use hookline_dlq::filter::now_ms;
use hookline_dlq::redrive::{REDRIVEN_BY, REDRIVEN_FROM, redrive};
use hookline_dlq::{
    DlqError, FilterSpec, RedriveOptions, Refusal, SelectedItem, Selection, Sources, Status, Target,
};
use hookline_kafka::{Registry, TopicSpec, ensure_topics};
use hookline_testkit::{
    Receiver, Reply, TestTopics, kafka_settings, read_all, registry_settings, unique_name,
    wait_until,
};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio_util::sync::CancellationToken;

use crate::common::{Dlq, envelope};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DEADLINE: Duration = Duration::from_secs(60);

fn event(endpoint: &str, n: usize) -> WebhookEvent {
    WebhookEvent {
        event_id: format!("evt-{}-{n}", unique_name("id")),
        event_type: "invoice.paid".to_owned(),
        endpoint_id: Some(endpoint.to_owned()),
        tenant_id: None,
        channels: Vec::new(),
        endpoint_url: None,
        payload: format!(r#"{{"invoice":{n}}}"#).into_bytes(),
        content_type: "application/json".to_owned(),
        headers: BTreeMap::new(),
        created_at_ms: 1_700_000_000_000,
        expires_at_ms: None,
    }
}

/// The sum of the high watermarks of `topic`'s partitions.
fn total_records(topic: &str) -> i64 {
    let consumer: BaseConsumer = kafka_settings().client_config().create().expect("client");
    let metadata = consumer
        .fetch_metadata(Some(topic), DEADLINE)
        .expect("metadata");
    metadata.topics()[0]
        .partitions()
        .iter()
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p.id(), DEADLINE)
                .expect("watermarks")
                .1
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fixed_endpoints_records_are_redriven_once_each_with_their_event_ids() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("redrive", &["200ms", "500ms"]);
    topics.create(&kafka, 2).await;
    let actions = format!("{}.dlq-actions", topics.events);
    ensure_topics(
        &kafka,
        &[TopicSpec::new(&actions, 1, 1).config("cleanup.policy", "compact")],
    )
    .await
    .expect("actions topic");
    let registry = Arc::new(Registry::new(&registry_settings()).expect("registry"));
    let producer: FutureProducer = kafka.producer_config().create().expect("producer");

    // One endpoint that fails until it is fixed, one that stays broken.
    let receiver = Receiver::start().await;
    let fixed = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&fixed);
    let url = receiver.script("fix", move |_| {
        Reply::Status(if flag.load(Ordering::SeqCst) {
            200
        } else {
            503
        })
    });
    let broken = receiver.script("broken", |_| Reply::Status(503));
    for (id, url) in [("ep-fix", url), ("ep-broken", broken)] {
        let value = serde_json::json!({ "url": url, "secrets": [SECRET] }).to_string();
        producer
            .send(
                FutureRecord::to(&topics.endpoints).key(id).payload(&value),
                DEADLINE,
            )
            .await
            .expect("endpoint");
    }
    let mut config = DispatcherConfig {
        kafka: kafka.clone(),
        registry: registry_settings(),
        group_id: unique_name("dispatchers"),
        ..DispatcherConfig::default()
    };
    config.topics.events = topics.events.clone();
    config.topics.endpoints = topics.endpoints.clone();
    config.topics.retry_tiers = topics.tiers.clone();
    config.retry.strategy = hookline_core::policy::StrategyKind::Fixed;
    config.retry.base_ms = 200;
    config.retry.cap_ms = 200;
    config.retry.max_attempts = 2;
    config.breaker.minimum_requests = 0;
    config.outbound.allow_loopback = true;
    config.admin.listen = "127.0.0.1:0".to_owned();
    config.http.timeout_ms = 2_000;
    let shutdown = CancellationToken::new();
    let running = start(config.into_settings().expect("config"), shutdown.clone())
        .await
        .expect("dispatcher");

    // Four events for the fixable endpoint (half Avro, half JSON), one for the broken one.
    let mut sent = Vec::new();
    for (n, endpoint) in ["ep-fix", "ep-fix", "ep-fix", "ep-fix", "ep-broken"]
        .into_iter()
        .enumerate()
    {
        let e = event(endpoint, n);
        let value = if n % 2 == 0 {
            registry
                .encode_value(&topics.events, WEBHOOK_EVENT_CURRENT, e.to_avro_value())
                .await
                .expect("avro")
        } else {
            e.to_json()
        };
        let headers = OwnedHeaders::new().insert(Header {
            key: "webhook-id",
            value: Some(&e.event_id),
        });
        producer
            .send(
                FutureRecord::to(&topics.events)
                    .key(endpoint)
                    .payload(&value)
                    .headers(headers),
                DEADLINE,
            )
            .await
            .expect("event");
        sent.push(e);
    }
    read_all(&kafka, &topics.dlq, 5, DEADLINE).await;
    fixed.store(true, Ordering::SeqCst);

    let sources = || Sources {
        kafka: &kafka,
        registry: Arc::clone(&registry),
        dlq_topic: topics.dlq.clone(),
        actions_topic: actions.clone(),
    };
    let options = |target: Target, dry_run: bool| RedriveOptions {
        target,
        events_topic: topics.events.clone(),
        dry_run,
        rate_per_s: Some(50.0),
        by: "tester".into(),
        role: None,
    };
    let ep_fix = || {
        FilterSpec {
            endpoints: vec!["ep-fix".into()],
            ..FilterSpec::default()
        }
        .build(now_ms())
        .expect("valid")
    };
    let main_before = total_records(&topics.events);

    // A tier that does not exist, and a dry run: nothing is sent or recorded.
    let missing = redrive(
        sources(),
        ep_fix(),
        &options(Target::Tier(Duration::from_secs(7)), false),
        |_| {},
    )
    .await;
    assert!(
        matches!(missing, Err(DlqError::TopicNotFound { ref topic }) if topic.ends_with(".retry.7s")),
        "{missing:?}"
    );
    let dry = redrive(sources(), ep_fix(), &options(Target::Main, true), |_| {})
        .await
        .expect("dry run");
    assert_eq!(dry.sent.len(), 4);
    assert_eq!(total_records(&topics.events), main_before);

    // One record through the 200ms tier, then the rest to the main topic.
    let one = dry.sent[0].place;
    let explicit = FilterSpec {
        records: vec![one.to_string()],
        ..FilterSpec::default()
    }
    .build(now_ms())
    .expect("valid");
    let tier = redrive(
        sources(),
        explicit,
        &options(Target::Tier(Duration::from_millis(200)), false),
        |_| {},
    )
    .await
    .expect("redrive to a tier");
    assert_eq!(tier.sent.len(), 1);
    assert!(tier.sent[0].target.starts_with(&topics.tier_topic("200ms")));
    let mut progress = Vec::new();
    let main = redrive(sources(), ep_fix(), &options(Target::Main, false), |e| {
        progress.push(format!("{e:?}"))
    })
    .await
    .expect("redrive");
    assert_eq!(main.sent.len(), 3);
    assert_eq!(main.skipped_handled, 1, "the one sent through the tier");
    assert_eq!(progress.len(), 4, "planned, then one per record");

    let delivered = || {
        let mut ok: HashMap<String, usize> = HashMap::new();
        for r in receiver.received("fix") {
            if r.reply == Reply::Status(200) {
                *ok.entry(r.header("webhook-id").unwrap_or("").to_owned())
                    .or_default() += 1;
            }
        }
        ok
    };
    wait_until(DEADLINE, "four redriven deliveries", || async {
        (delivered().values().sum::<usize>() >= 4).then_some(())
    })
    .await;

    // A second identical redrive sends nothing.
    let main_after = total_records(&topics.events);
    let again = redrive(sources(), ep_fix(), &options(Target::Main, false), |_| {})
        .await
        .expect("second redrive");
    assert!(again.sent.is_empty(), "{again:?}");
    assert_eq!(again.skipped_handled, 4);
    assert_eq!(total_records(&topics.events), main_after);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ok = delivered();
    for e in sent
        .iter()
        .filter(|e| e.endpoint_id.as_deref() == Some("ep-fix"))
    {
        assert_eq!(
            ok.get(&e.event_id),
            Some(&1),
            "{} delivered exactly once",
            e.event_id
        );
    }
    assert_eq!(ok.len(), 4, "only the original event ids");
    assert_eq!(
        receiver.count("broken"),
        2,
        "the broken endpoint was not redriven"
    );

    // The re-published records carry their provenance; the actions say where they went.
    let republished = read_all(&kafka, &topics.events, 8, DEADLINE).await;
    let provenance: Vec<_> = republished
        .iter()
        .filter_map(|m| {
            let headers = m.headers()?;
            let from = headers.iter().find(|h| h.key == REDRIVEN_FROM)?;
            let by = headers.iter().find(|h| h.key == REDRIVEN_BY)?;
            Some((from.value?.to_vec(), by.value?.to_vec()))
        })
        .collect();
    assert_eq!(provenance.len(), 3);
    assert!(
        provenance
            .iter()
            .all(|(from, by)| from.starts_with(topics.dlq.as_bytes()) && by == b"tester")
    );
    let all = FilterSpec::default().build(now_ms()).expect("valid");
    let mut selection = Selection::open(sources(), all, Default::default(), true)
        .await
        .expect("open");
    let mut statuses = Vec::new();
    while let Some(SelectedItem::Record(s)) = selection.next().await.expect("read") {
        let target = s.history.0.last().and_then(|a| a.target.clone());
        statuses.push((s.status(), target.is_some()));
    }
    statuses.sort();
    assert_eq!(
        statuses,
        [
            (Status::Open, false),
            (Status::Redriven, true),
            (Status::Redriven, true),
            (Status::Redriven, true),
            (Status::Redriven, true)
        ]
    );
    shutdown.cancel();
    running.wait().await.expect("clean stop");
}

/// The producer's default `message.max.bytes`, less room for the DLQ record's key, headers
/// and per-record overhead.
const ROOM_FOR_THE_VALUE: usize = 1_000_000 - 1_024;

#[tokio::test]
async fn a_record_whose_payload_was_truncated_is_refused_by_every_redrive() {
    let d = Dlq::new("redrive-truncated").await;
    ensure_topics(&d.kafka, &[TopicSpec::new(&d.events, 1, 1)])
        .await
        .expect("events topic");
    let now = now_ms();
    let whole = envelope("ep-a", "invoice.paid", ErrorReason::RetriesExhausted, now);
    let whole_at = d.park(0, &whole).await;

    // A 1.5 MB event: its envelope is more than Kafka takes, until it is cut.
    let payload: Vec<u8> = (0..1_500_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut big = envelope("ep-a", "invoice.paid", ErrorReason::RetriesExhausted, now);
    big.original_payload_bytes = payload.clone();
    let subject = format!("{}-value", d.dlq);
    let schema_id = d
        .registry
        .register(&subject, DLQ_ENVELOPE_CURRENT)
        .await
        .expect("the current schema registers");
    let too_large = big.to_framed_avro(schema_id).expect("framed");
    let refused = d
        .producer
        .send(
            FutureRecord::<str, [u8]>::to(&d.dlq)
                .key("ep")
                .payload(&too_large),
            DEADLINE,
        )
        .await
        .expect_err("too large for Kafka");
    assert!(
        matches!(
            refused.0,
            KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge)
        ),
        "{:?}",
        refused.0
    );
    assert_eq!(
        big.fit_within(ROOM_FOR_THE_VALUE),
        Fit::Truncated {
            original_size: 1_500_000
        }
    );
    let framed = big.to_framed_avro(schema_id).expect("framed");
    assert!(framed.len() <= ROOM_FOR_THE_VALUE);
    let cut_at = d.raw(0, &framed).await;

    // Read back through the registry: marked, with the full size and the first bytes.
    let selected = d.selected(false).await;
    let read = selected
        .iter()
        .find(|s| s.record.place() == cut_at)
        .expect("the cut record is read");
    let e = &read.record.envelope;
    assert!(e.original_payload_truncated);
    assert_eq!(e.original_payload_size, Some(1_500_000));
    assert!(payload.starts_with(&e.original_payload_bytes));
    assert_eq!(e.event_id, big.event_id);

    let options = |dry_run: bool| RedriveOptions {
        target: Target::Main,
        events_topic: d.events.clone(),
        dry_run,
        rate_per_s: None,
        by: "tester".into(),
        role: None,
    };
    let all = || FilterSpec::default().build(now_ms()).expect("valid");
    let events_before = total_records(&d.events);
    let dry = redrive(d.sources(), all(), &options(true), |_| {})
        .await
        .expect("dry run");
    let sent: Vec<_> = dry.sent.iter().map(|s| s.place).collect();
    assert_eq!(sent, [whole_at], "only the whole record would go");
    assert_eq!(dry.refused.len(), 1, "{dry:?}");
    assert_eq!(dry.refused[0].place, cut_at);
    assert_eq!(dry.refused[0].event_id, big.event_id);
    let Refusal::PayloadTruncated {
        kept,
        original_size,
    } = dry.refused[0].why;
    assert_eq!(
        (kept, original_size),
        (e.original_payload_bytes.len(), Some(1_500_000))
    );
    assert!(
        dry.refused[0]
            .why
            .to_string()
            .contains("cannot be redriven byte for byte")
    );

    let done = redrive(d.sources(), all(), &options(false), |_| {})
        .await
        .expect("redrive");
    assert_eq!(done.sent.len(), 1);
    assert_eq!(done.sent[0].place, whole_at);
    assert_eq!(done.refused, dry.refused);
    assert_eq!(
        total_records(&d.events),
        events_before + 1,
        "only the whole one re-published"
    );

    // The refused record stays open, and is refused again, not skipped as handled.
    let again = redrive(d.sources(), all(), &options(false), |_| {})
        .await
        .expect("second redrive");
    assert!(again.sent.is_empty());
    assert_eq!(again.skipped_handled, 1);
    assert_eq!(again.refused, dry.refused);
    let open: Vec<_> = d
        .selected(false)
        .await
        .iter()
        .map(|s| (s.record.place(), s.status()))
        .collect();
    assert_eq!(open, [(cut_at, Status::Open)]);
}
