//! `hookline demo`: real deliveries, retries and DLQ records through the local stack. It
//! starts a receiver whose endpoints fail in the usual ways, runs a dispatcher in-process,
//! publishes a few hundred events, waits until every one is delivered or parked, and prints
//! a summary, one DLQ record decoded through the registry, and the story of one retried
//! event from the attempt log (as `hookline events show`).

mod dlq_tail;
mod receiver;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hookline_core::policy::{RetryTiers, StrategyKind};
use hookline_core::signing::SigningSecret;
use hookline_core::{EndpointConfig, WebhookEvent};
use hookline_dispatcher::DispatcherConfig;
use hookline_dlq::{DlqRecord, History, Selected};
use hookline_producer::{
    Encoding, EndpointStore, Publisher, PublisherConfig, TopicsPlan, provision,
};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio_util::sync::CancellationToken;

use self::dlq_tail::DlqTail;
use self::receiver::{Behaviour, DemoReceiver};
use super::Context;

/// Options of `hookline demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// How many events to publish.
    #[arg(long, default_value_t = 300)]
    events: usize,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 180)]
    timeout_s: u64,
}

/// The demo's retry tiers: short, so the whole run takes seconds.
const TIERS: [&str; 2] = ["1s", "5s"];

/// The demo endpoints, and the share of events each gets (out of 20).
const ENDPOINTS: [(&str, Behaviour, usize); 5] = [
    ("demo-reliable", Behaviour::Reliable, 8),
    ("demo-flaky", Behaviour::Flaky, 5),
    ("demo-rate-limited", Behaviour::RateLimited, 4),
    ("demo-broken", Behaviour::Broken, 2),
    ("demo-gone", Behaviour::Gone, 1),
];

/// Runs the demo.
pub async fn run(args: DemoArgs, context: &Context) -> anyhow::Result<()> {
    let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let topics = &context.topics;
    println!(
        "hookline demo (run {run}) on {} / {}",
        context.kafka.bootstrap_servers,
        hookline_core::url_guard::redact_url(&context.registry.url)
    );

    let mut plan = TopicsPlan::new(topics.clone());
    plan.tiers = RetryTiers::from_suffixes(&TIERS).context("demo tiers")?;
    plan.partitions = 3;
    provision(&context.kafka, &plan)
        .await
        .context("creating the topics")?;

    let behaviours: HashMap<String, Behaviour> = ENDPOINTS
        .iter()
        .map(|(id, behaviour, _)| ((*id).to_owned(), *behaviour))
        .collect();
    let receiver = DemoReceiver::start(behaviours)
        .await
        .context("starting the demo receiver")?;
    let store = EndpointStore::new(&context.kafka, topics.endpoints.clone())
        .context("opening the endpoint table")?;
    for (id, _, _) in ENDPOINTS {
        let secret = SigningSecret::generate(&mut rand::rng()).to_whsec();
        let config = EndpointConfig::new(receiver.url(id), vec![secret]);
        store
            .put(id, &config)
            .await
            .with_context(|| format!("registering endpoint {id}"))?;
    }

    let dlq = DlqTail::start(context, &topics.dlq()).await?;

    let mut config = DispatcherConfig {
        kafka: context.kafka.clone(),
        registry: context.registry.clone(),
        group_id: "hookline-demo".to_owned(),
        shutdown_grace_ms: 5_000,
        ..DispatcherConfig::default()
    };
    config.topics.events = topics.events.clone();
    config.topics.endpoints = topics.endpoints.clone();
    config.topics.retry_tiers = TIERS.iter().map(|t| (*t).to_owned()).collect();
    config.retry.strategy = StrategyKind::ExponentialJitter;
    config.retry.base_ms = 400;
    config.retry.cap_ms = 5_000;
    config.retry.max_attempts = 4;
    // Leftovers of an interrupted earlier run end in the DLQ soon rather than in a day.
    config.retry.max_age_ms = Some(120_000);
    // The broken endpoint would open its circuit breaker and hold its records back for
    // minutes; the demo shows retries and the DLQ instead.
    config.breaker.minimum_requests = 0;
    config.outbound.allow_loopback = true;
    config.admin.listen = "127.0.0.1:0".to_owned();
    let shutdown = CancellationToken::new();
    let settings = config.into_settings().context("demo dispatcher settings")?;
    let dispatcher = hookline_dispatcher::start(settings, shutdown.clone())
        .await
        .context("starting the dispatcher")?;

    // Publish: Avro through the registry, spread over the endpoints; plus two events for an
    // endpoint nobody configured and one record that is not an event at all.
    let publisher = Publisher::new(
        &context.kafka,
        Some(context.registry()?),
        PublisherConfig::new(topics.events.clone(), Encoding::Avro),
    )
    .context("creating the publisher")?;
    let weights: Vec<&str> = ENDPOINTS
        .iter()
        .flat_map(|(id, _, share)| std::iter::repeat_n(*id, *share))
        .collect();
    let mut expected: HashSet<String> = HashSet::new();
    let started = Instant::now();
    for n in 0..args.events {
        let endpoint = if n % 150 == 149 {
            "demo-unknown"
        } else {
            weights[n % weights.len()]
        };
        let event = demo_event(&run, n, endpoint);
        publisher
            .publish(&event)
            .await
            .with_context(|| format!("publishing event {n}"))?;
        expected.insert(event.event_id);
    }
    let producer: FutureProducer = context.kafka.producer_config().create()?;
    let garbage = FutureRecord::to(&topics.events)
        .key("demo-reliable")
        .payload("{\"oops\": not json");
    let delivery = producer
        .send(garbage, Duration::from_secs(30))
        .await
        .map_err(|(error, _)| error)
        .context("publishing the malformed record")?;
    expected.insert(hookline_core::envelope::derived_event_id(
        &topics.events,
        delivery.partition,
        delivery.offset,
    ));
    println!(
        "published {} events and 1 malformed record in {:?}",
        args.events,
        started.elapsed()
    );

    // Wait until every event is delivered or parked.
    let deadline = Instant::now() + Duration::from_secs(args.timeout_s);
    let (delivered, parked) = loop {
        let delivered: HashMap<String, u32> = receiver
            .successes()
            .into_iter()
            .filter(|s| expected.contains(&s.event_id))
            .map(|s| (s.event_id, s.attempt))
            .collect();
        let parked: Vec<_> = dlq
            .records()
            .into_iter()
            .filter(|r| expected.contains(&r.envelope.event_id))
            .collect();
        let done: HashSet<&String> = delivered
            .keys()
            .chain(parked.iter().map(|r| &r.envelope.event_id))
            .collect();
        if done.len() >= expected.len() {
            break (delivered, parked);
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "timed out: {} of {} events delivered or parked after {} s",
                done.len(),
                expected.len(),
                args.timeout_s
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let totals = dispatcher.metrics().totals();
    shutdown.cancel();
    dispatcher.wait().await.context("stopping the dispatcher")?;
    receiver.stop();
    dlq.stop();

    print_summary(
        &delivered,
        &parked,
        &totals,
        receiver.requests(),
        started.elapsed(),
    );
    if let Some(example) = parked
        .iter()
        .find(|r| r.envelope.error_reason == hookline_core::ErrorReason::RetriesExhausted)
        .or_else(|| parked.first())
    {
        println!(
            "\nOne DLQ record, decoded through the registry (subject {}-value):",
            topics.dlq()
        );
        let payload = example.envelope.original_payload_bytes.clone();
        let example = Selected {
            record: example.clone(),
            history: History::default(),
        };
        let mut json = hookline_dlq::json::to_json(&example);
        let registry = context.registry()?;
        if let (Some(event), serde_json::Value::Object(fields)) = (
            hookline_dlq::original::original_event(&registry, &payload).await,
            &mut json,
        ) {
            fields.insert("original_event".to_owned(), event);
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
    }
    let story_of = delivered
        .iter()
        .filter(|(_, attempt)| **attempt > 1)
        .max_by_key(|(id, attempt)| (**attempt, std::cmp::Reverse((*id).clone())))
        .map(|(id, _)| id.clone())
        .or_else(|| parked.first().map(|r| r.envelope.event_id.clone()));
    let bin = std::env::current_exe()
        .ok()
        .and_then(|exe| {
            let cwd = std::env::current_dir().ok()?;
            exe.strip_prefix(cwd).ok().map(|p| p.display().to_string())
        })
        .unwrap_or_else(|| "hookline".to_owned());
    println!("\nThe receiver and the dispatcher have stopped; the stack keeps running.");
    println!("  inspect the DLQ:  {bin} dlq inspect --summary");
    println!("                    {bin} dlq inspect --reason retries_exhausted --output json");
    println!("                    (the README shows the same with Python's confluent-kafka)");
    if let Some(event_id) = &story_of {
        println!("  one event's story: {bin} events show {event_id}");
    }
    println!("  follow attempts:  {bin} events tail --endpoint demo-flaky");
    println!("  stop the stack:   deploy/local/stack down");
    // The end: one retried (or parked) event's whole story, as `hookline events show`.
    if let Some(event_id) = &story_of {
        show_history(context, event_id).await?;
    }
    Ok(())
}

/// Prints the story of `event_id` from the attempt log, as `hookline events show` does.
/// The log is written behind delivery: wait (a little) until it tells how the event ended.
async fn show_history(context: &Context, event_id: &str) -> anyhow::Result<()> {
    use hookline_dlq::history::{LookupOptions, StepKind, lookup};
    let registry = context.registry()?;
    let options = LookupOptions::new(context.topics.attempts());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let found = lookup(&context.kafka, &registry, event_id, &options)
            .await
            .context("reading the attempt log")?;
        let ended = found
            .story
            .steps
            .last()
            .is_some_and(|s| matches!(s.kind, StepKind::Delivered | StepKind::Parked));
        if ended || Instant::now() > deadline {
            println!(
                "\nOne event's story from the attempt log (hookline events show {event_id}; \
                 {} records read from {} partition {}):",
                found.records_scanned, found.topic, found.partition
            );
            print!("{}", found.story.to_text());
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn demo_event(run: &str, n: usize, endpoint: &str) -> WebhookEvent {
    let kinds = [
        "order.created",
        "order.paid",
        "invoice.finalized",
        "customer.updated",
    ];
    WebhookEvent {
        event_id: format!("demo-{run}-{n:04}"),
        event_type: kinds[n % kinds.len()].to_owned(),
        endpoint_id: Some(endpoint.to_owned()),
        tenant_id: None,
        channels: Vec::new(),
        endpoint_url: None,
        payload: serde_json::json!({
            "id": format!("ord_{run}{n:04}"),
            "amount_cents": 1_000 + (n * 37) % 9_000,
            "currency": "EUR",
        })
        .to_string()
        .into_bytes(),
        content_type: "application/json".to_owned(),
        headers: BTreeMap::new(),
        created_at_ms: 0,
        expires_at_ms: None,
    }
}

fn print_summary(
    delivered: &HashMap<String, u32>,
    parked: &[DlqRecord],
    totals: &hookline_dispatcher::Totals,
    requests: usize,
    took: Duration,
) {
    let first = delivered.values().filter(|a| **a == 1).count();
    let mut after: BTreeMap<u32, usize> = BTreeMap::new();
    for attempt in delivered.values().filter(|a| **a > 1) {
        *after.entry(*attempt).or_default() += 1;
    }
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for record in parked {
        *reasons
            .entry(record.envelope.error_reason.code())
            .or_default() += 1;
    }
    let join = |items: Vec<String>| {
        if items.is_empty() {
            "-".to_owned()
        } else {
            items.join(", ")
        }
    };
    println!("\nSummary ({requests} HTTP requests, {took:.1?}):");
    println!("  delivered on the first attempt  {first:>5}");
    println!(
        "  delivered after retries         {:>5}   ({})",
        after.values().sum::<usize>(),
        join(
            after
                .iter()
                .map(|(a, n)| format!("attempt {a}: {n}"))
                .collect()
        )
    );
    println!(
        "  retries scheduled by tier       {:>5}   ({})",
        totals.retries_by_tier.values().sum::<u64>(),
        join(
            totals
                .retries_by_tier
                .iter()
                .map(|(t, n)| format!("{t}: {n}"))
                .collect()
        )
    );
    println!(
        "  parked in the DLQ               {:>5}   ({})",
        parked.len(),
        join(reasons.iter().map(|(r, n)| format!("{r}: {n}")).collect())
    );
}
