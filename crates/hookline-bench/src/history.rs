//! `hookline-bench history`: how long `hookline events show` takes to find one event in a
//! large attempt log. Writes `--records` attempt records of many events (five each, keyed by
//! event id with the dispatcher's murmur2 partitioner, framed with the schema id the real
//! registry gives the attempt schema, as the dispatcher writes them) over `--partitions`
//! partitions, then times `hookline events show` for one event, several times.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use hookline_core::attempt_log::{AttemptKind, AttemptRecord, partition_for};
use hookline_core::schema::WEBHOOK_ATTEMPT_CURRENT;
use hookline_kafka::{KafkaSettings, Registry, RegistrySettings, TopicSpec, ensure_topics};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};

/// Options of `hookline-bench history`.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// The `hookline` binary to time (a release build).
    #[arg(long, default_value = "target/release/hookline")]
    hookline: PathBuf,
    /// Attempt records written, over all events (five per event).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(5..=50_000_000))]
    records: u64,
    /// Partitions of the attempt log.
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(i32).range(1..=1000))]
    partitions: i32,
    /// Timed lookups of the event (the first one also fetches the writer schema).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    lookups: u32,
    /// Kafka brokers.
    #[arg(
        long,
        env = "HOOKLINE_BOOTSTRAP_SERVERS",
        default_value = "127.0.0.1:9092"
    )]
    bootstrap_servers: String,
    /// The schema registry's Confluent-compatible API.
    #[arg(
        long,
        env = "HOOKLINE_REGISTRY_URL",
        default_value = "http://127.0.0.1:8081/apis/ccompat/v7"
    )]
    registry_url: String,
}

fn record(event_id: &str, kind: AttemptKind, attempt: u32, at: i64) -> AttemptRecord {
    let failed = kind == AttemptKind::Attempt && attempt < 3;
    AttemptRecord {
        event_id: event_id.to_owned(),
        tenant_id: Some("acme".to_owned()),
        endpoint_id: Some("ep-bench".to_owned()),
        kind,
        attempt,
        timestamp_ms: at,
        duration_ms: (kind == AttemptKind::Attempt).then_some(42),
        http_status: (kind == AttemptKind::Attempt).then_some(if failed { 503 } else { 200 }),
        error_kind: failed.then(|| "server_error".to_owned()),
        response_excerpt: Some(r#"{"error":"try again later"}"#.to_owned()),
        tier: (kind == AttemptKind::RetryScheduled).then(|| "5s".to_owned()),
        reason: (kind == AttemptKind::RetryScheduled).then(|| "server_error".to_owned()),
        deliveries: None,
        dispatcher_id: "bench-dispatcher".to_owned(),
        trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".to_owned()),
        published_at_ms: Some(at - 5),
        redriven_from: None,
    }
}

/// One event's five records: attempt, retry, attempt, retry, attempt (delivered).
fn story(event_id: &str, at: i64) -> [AttemptRecord; 5] {
    [
        record(event_id, AttemptKind::Attempt, 1, at),
        record(event_id, AttemptKind::RetryScheduled, 1, at + 1),
        record(event_id, AttemptKind::Attempt, 2, at + 5_000),
        record(event_id, AttemptKind::RetryScheduled, 2, at + 5_001),
        record(event_id, AttemptKind::Attempt, 3, at + 65_000),
    ]
}

/// Runs the benchmark and prints what it measured.
pub async fn run(args: HistoryArgs) -> anyhow::Result<()> {
    let kafka = KafkaSettings::new(&args.bootstrap_servers);
    let events_topic = hookline_testkit::unique_name("bench-history");
    let topic = format!("{events_topic}.attempts");
    ensure_topics(&kafka, &[TopicSpec::new(&topic, args.partitions, 1)])
        .await
        .with_context(|| format!("creating {topic}"))?;
    let registry = Registry::new(&RegistrySettings {
        url: args.registry_url.clone(),
        ..RegistrySettings::default()
    })?;
    let schema_id = registry
        .register(&format!("{topic}-value"), WEBHOOK_ATTEMPT_CURRENT)
        .await
        .context("registering the attempt schema")?;
    let mut config = kafka.producer_config();
    config
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "50")
        .set("batch.size", "1000000")
        .set("compression.type", "lz4")
        .set("queue.buffering.max.messages", "500000");
    let producer: FutureProducer = config.create().context("creating the producer")?;
    let events = args.records / 5;
    let target_index = events / 2;
    let target = format!("{events_topic}-evt-{target_index}");
    let start_ms = jiff::Timestamp::now().as_millisecond() - 3_600_000;
    eprintln!(
        "history: writing {} records of {events} events to {topic}",
        events * 5
    );
    let began = Instant::now();
    let mut pending = futures::stream::FuturesUnordered::new();
    for i in 0..events {
        let id = format!("{events_topic}-evt-{i}");
        let at = start_ms + i64::try_from(i).unwrap_or(0);
        for r in story(&id, at) {
            let bytes = r.to_framed_avro(schema_id)?;
            let future = producer
                .send_result(
                    FutureRecord::to(&topic)
                        .key(r.event_id.as_bytes())
                        .payload(&bytes),
                )
                .map_err(|(error, _)| error)
                .context("queueing a record")?;
            pending.push(future);
        }
        if pending.len() >= 100_000 {
            drain(&mut pending).await?;
        }
    }
    drain(&mut pending).await?;
    let wrote = began.elapsed();
    let partition = partition_for(target.as_bytes(), args.partitions).context("a partition")?;
    let (on_partition, total) = tokio::task::spawn_blocking({
        let kafka = kafka.clone();
        let topic = topic.clone();
        let partitions = args.partitions;
        move || -> anyhow::Result<(i64, i64)> {
            let consumer: BaseConsumer = kafka.client_config().create()?;
            let mut total = 0;
            let mut on = 0;
            for p in 0..partitions {
                let (low, high) = consumer.fetch_watermarks(&topic, p, Duration::from_secs(30))?;
                total += high - low;
                if p == partition {
                    on = high - low;
                }
            }
            Ok((on, total))
        }
    })
    .await??;
    println!(
        "wrote {total} attempt records ({events} events) over {} partitions in {:.1} s; \
         event {target} is in partition {partition}, which holds {on_partition} records",
        args.partitions,
        wrote.as_secs_f64()
    );
    let mut times = Vec::new();
    for round in 1..=args.lookups {
        let began = Instant::now();
        let out = tokio::process::Command::new(&args.hookline)
            .args(["--bootstrap-servers", &args.bootstrap_servers])
            .args(["--registry-url", &args.registry_url])
            .args(["--events-topic", &events_topic])
            .args(["events", "show", &target, "--output", "json"])
            .output()
            .await
            .with_context(|| format!("running {}", args.hookline.display()))?;
        let took = began.elapsed();
        if !out.status.success() {
            bail!(
                "events show failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let steps = json["steps"].as_array().map_or(0, Vec::len);
        println!(
            "lookup {round}: {:.3} s, {} records read, {steps} steps",
            took.as_secs_f64(),
            json["records_scanned"]
        );
        times.push(took);
    }
    times.sort();
    let median = times[times.len() / 2];
    println!(
        "events show: median {:.3} s over {} lookups (min {:.3} s, max {:.3} s) for one event \
         among {total} records ({on_partition} on its partition)",
        median.as_secs_f64(),
        times.len(),
        times[0].as_secs_f64(),
        times[times.len() - 1].as_secs_f64()
    );
    Ok(())
}

async fn drain(
    pending: &mut futures::stream::FuturesUnordered<rdkafka::producer::DeliveryFuture>,
) -> anyhow::Result<()> {
    use futures::StreamExt;
    while let Some(done) = pending.next().await {
        match done {
            Ok(Ok(_)) => {}
            Ok(Err((error, _))) => return Err(error).context("writing an attempt record"),
            Err(_) => bail!("the producer went away"),
        }
    }
    Ok(())
}
