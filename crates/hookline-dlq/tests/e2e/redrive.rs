//! End-to-end test of a redrive against the real local stack: an in-process dispatcher
//! parks a failing endpoint's deliveries in the DLQ, the endpoint is fixed, and a redrive
//! delivers each one exactly once with its original event id; a second redrive sends nothing.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_core::schema::WEBHOOK_EVENT_V1;
use hookline_dispatcher::{DispatcherConfig, start};
use hookline_dlq::filter::now_ms;
use hookline_dlq::redrive::{REDRIVEN_BY, REDRIVEN_FROM, redrive};
use hookline_dlq::{
    DlqError, FilterSpec, RedriveOptions, SelectedItem, Selection, Sources, Status, Target,
};
use hookline_kafka::{Registry, TopicSpec, ensure_topics};
use hookline_testkit::{
    Receiver, Reply, TestTopics, kafka_settings, read_all, registry_settings, unique_name,
    wait_until,
};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio_util::sync::CancellationToken;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DEADLINE: Duration = Duration::from_secs(60);

fn event(endpoint: &str, n: usize) -> WebhookEvent {
    WebhookEvent {
        event_id: format!("evt-{}-{n}", unique_name("id")),
        event_type: "invoice.paid".to_owned(),
        endpoint_id: endpoint.to_owned(),
        endpoint_url: None,
        payload: format!(r#"{{"invoice":{n}}}"#).into_bytes(),
        content_type: "application/json".to_owned(),
        headers: BTreeMap::new(),
        created_at_ms: 1_700_000_000_000,
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
    config.breaker.failure_threshold = 0;
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
                .encode_value(&topics.events, WEBHOOK_EVENT_V1, e.to_avro_value())
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
    for e in sent.iter().filter(|e| e.endpoint_id == "ep-fix") {
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
