//! `hookline dispatch` killed with SIGKILL while it moves a slow endpoint's records into the
//! slow lane (between a record's lane write and its source offset's commit, and with lane
//! records waiting for their turn): the next dispatcher of the group delivers every event.

use std::collections::HashMap;
use std::time::Duration;

use hookline_testkit::{Receiver, Reply, TestTopics, kafka_settings, unique_name, wait_until};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};

use crate::dispatch::{dispatcher, terminate};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DEADLINE: Duration = Duration::from_secs(120);

/// Records written to `topic` so far, over its partitions (0 while it does not exist).
async fn written(topic: &str) -> i64 {
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = kafka_settings()
            .client_config()
            .create()
            .expect("a metadata client");
        let Ok(metadata) = consumer.fetch_metadata(Some(&topic), Duration::from_secs(5)) else {
            return 0;
        };
        metadata
            .topics()
            .iter()
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .filter_map(|p| {
                consumer
                    .fetch_watermarks(&topic, p, Duration::from_secs(5))
                    .ok()
            })
            .map(|(low, high)| high - low)
            .sum()
    })
    .await
    .expect("the watermark reader")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dispatcher_killed_while_it_fills_the_slow_lane_loses_no_event() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("lanecrash", &["200ms", "1s"]);
    topics.create(&kafka, 2).await;
    let receiver = Receiver::start().await;
    let url = receiver.script("slow", |_| Reply::Slow {
        delay_ms: 400,
        status: 204,
    });
    let producer: FutureProducer = kafka.producer_config().create().expect("producer");
    let endpoint = serde_json::json!({ "url": url, "secrets": [SECRET] }).to_string();
    producer
        .send(
            FutureRecord::to(&topics.endpoints)
                .key("ep-slow")
                .payload(&endpoint),
            DEADLINE,
        )
        .await
        .expect("endpoint written");
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("dispatcher.toml");
    // Slow past 200 ms, and two attempts for slow endpoints: most records wait in the lane.
    std::fs::write(
        &config,
        format!(
            "group_id = \"{}\"\nshutdown_grace_ms = 2000\nsession_timeout_ms = 6000\n\n[topics]\nretry_tiers = [{}]\n\n\
             [retry]\nbase_ms = 200\ncap_ms = 1000\n\n\
             [outbound]\nallow_loopback = true\n\n[concurrency]\nmax_in_flight = 4\n\
             per_endpoint = 1\nslow_after_ms = 200\n\n[admin]\nlisten = \"127.0.0.1:0\"\n",
            unique_name("lanecrash-group"),
            topics.tiers_toml()
        ),
    )
    .expect("config file");

    let mut first = dispatcher("lane-a", &topics, &config, dir.path());
    let mut ids = Vec::new();
    for n in 0..60 {
        let id = format!("evt-{n}-{}", unique_name("l"));
        let value = serde_json::json!({
            "event_id": id, "event_type": "order.created", "endpoint_id": "ep-slow",
            "payload": { "n": n },
        })
        .to_string();
        producer
            .send(
                FutureRecord::to(&topics.events)
                    .key("ep-slow")
                    .payload(&value),
                DEADLINE,
            )
            .await
            .expect("event written");
        ids.push(id);
    }
    let lane = format!("{}.lane", topics.events);
    wait_until(
        DEADLINE,
        "the first dispatcher filling the lane",
        || async { (written(&lane).await >= 20).then_some(()) },
    )
    .await;
    // No chance to commit what it wrote to the lane, nor to finish what waits there.
    first.start_kill().expect("kill -9");
    first.wait().await.expect("killed");

    let mut second = dispatcher("lane-b", &topics, &config, dir.path());
    let delivered = wait_until(DEADLINE, "every event delivered at least once", || async {
        let mut delivered: HashMap<String, usize> = HashMap::new();
        for request in receiver.received("slow") {
            if let Some(id) = request.header("webhook-id") {
                *delivered.entry(id.to_owned()).or_default() += 1;
            }
        }
        ids.iter()
            .all(|id| delivered.contains_key(id))
            .then_some(delivered)
    })
    .await;
    // At least once, duplicates bounded: a record the first wrote to the lane but did not
    // commit is written there again, and a lane copy the first was delivering when it died
    // is delivered again: three times at the most.
    assert!(
        delivered.values().all(|n| *n <= 3),
        "an event delivered more than three times: {delivered:?}"
    );
    assert!(terminate(&mut second).await.success());
}
