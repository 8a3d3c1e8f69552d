//! Poison: the records of the hardening issue, written with raw clients into a run of good
//! events: a header name that is not UTF-8 (kcat), a zstd-compressed batch (kcat), garbage
//! bytes, a 1.5 MB event on a topic that takes 3 MB (an rdkafka producer with
//! `message.max.bytes` 3,000,000) and an event with forged retry headers on the main topic.
//! Each must end as expected: parked with its reason, or (zstd, forged) delivered, the
//! forged one as a first attempt; nothing lost, no dispatcher down.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use hookline_core::envelope::ErrorReason;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::json;
use tokio::io::AsyncWriteExt as _;

use super::{Env, Scenario};
use crate::load::{Expect, Published, event};
use crate::receiver::always;
use crate::report::ScenarioReport;

/// The scenario's name.
pub const NAME: &str = "poison";
const TITLE: &str = "poison records written with raw clients, mixed into good events";

/// Runs it.
pub async fn run(env: &Env) -> anyhow::Result<ScenarioReport> {
    let (events, rate): (u64, f64) = env.pick((1_500, 100.0), (6_000, 200.0));
    let mut s = Scenario::new(env, NAME, TITLE).await?;
    s.settings = json!({
        "events": events, "rate_per_s": rate, "replicas": 2,
        "poison": ["non-UTF-8 header name", "zstd batch", "garbage", "1.5 MB event", "forged hookline-due-at"],
    });
    s.fixture.allow_large_records(&env.kafka, 3_000_000).await?;
    s.endpoint("ok", always(204), true).await?;
    s.start_replicas(2).await?;

    let load = s.steady_load(events, rate);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let forged = write_poison(&s).await?;
    s.published(load).await?;
    s.settle(Duration::from_secs(120)).await;

    let copies: Vec<_> = s
        .tally
        .requests()
        .into_iter()
        .filter(|r| r.id == forged)
        .collect();
    match copies.first() {
        Some(first) if first.attempt != 1 => s.notes.push(format!(
            "the forged record arrived as attempt {} (its forged hookline-attempt was honoured)",
            first.attempt
        )),
        Some(first) => {
            let published = s
                .ledger
                .all()
                .into_iter()
                .find(|p| p.id == forged)
                .map_or(0.0, |p| p.at);
            s.notes.push(format!(
                "the forged record arrived as attempt 1, {:.2} s after it was written",
                first.at - published
            ));
        }
        None => {}
    }
    let mut report = s.finish(0).await;
    if report
        .figures
        .unexpected_examples
        .iter()
        .any(|e| e.contains("forged"))
        || report.notes.iter().any(|n| n.contains("was honoured"))
    {
        report
            .failures
            .push("the forged retry headers were honoured on the main topic".to_owned());
    }
    Ok(report)
}

/// Writes one record of each kind and records what should become of it; returns the id of
/// the forged one.
async fn write_poison(s: &Scenario<'_>) -> anyhow::Result<String> {
    let topic = s.fixture.topics.events.clone();
    let good = |name: &str| {
        let mut event = event(&s.run, "ok", 0);
        event.event_id = format!("{}-poison-{name}", s.run);
        event
    };
    let record = |id: &str, partition: i32, expect: Expect, key: Option<String>| Published {
        id: id.to_owned(),
        endpoint: "ok".to_owned(),
        partition,
        at: s.clock.now(),
        expect,
        key,
    };

    // 1. A header name that is not UTF-8 (rdkafka's header accessor panics on it).
    let key = format!("{}-poison-header", s.run);
    let header = good("header");
    kcat(
        s,
        &topic,
        0,
        &key,
        &header.to_json(),
        &[OsStr::new("-H"), OsStr::from_bytes(b"\xff\xfe=1")],
    )
    .await?;
    s.ledger.push(record(
        &header.event_id,
        0,
        Expect::Park(ErrorReason::MalformedEvent),
        Some(key),
    ));
    s.timeline
        .note("poison: a header name that is not UTF-8 (kcat)");

    // 2. A zstd-compressed batch: a good event.
    let zstd = good("zstd");
    kcat(
        s,
        &topic,
        1,
        "ok",
        &zstd.to_json(),
        &[OsStr::new("-z"), OsStr::new("zstd")],
    )
    .await?;
    s.ledger
        .push(record(&zstd.event_id, 1, Expect::Deliver, None));
    s.timeline.note("poison: a zstd batch (kcat)");

    let mut config = s.env.kafka.client_config();
    config.set("message.max.bytes", "3000000");
    let raw: FutureProducer = config.create().context("creating the raw producer")?;
    let send = async |record: FutureRecord<'_, str, [u8]>| {
        raw.send(record, Duration::from_secs(30))
            .await
            .map_err(|(error, _)| error)
            .context("writing a poison record")
    };

    // 3. Garbage bytes.
    let key = format!("{}-poison-garbage", s.run);
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    send(
        FutureRecord::to(&topic)
            .partition(2)
            .key(key.as_str())
            .payload(garbage.as_slice()),
    )
    .await?;
    s.ledger.push(record(
        &format!("{}-poison-garbage", s.run),
        2,
        Expect::Park(ErrorReason::MalformedEvent),
        Some(key),
    ));
    s.timeline.note("poison: garbage bytes");

    // 4. A 1.5 MB event: over the payload limit, its envelope over the producer's.
    let key = format!("{}-poison-large", s.run);
    let mut large = good("large");
    large.payload = format!(r#"{{"blob":"{}"}}"#, "a".repeat(1_500_000)).into_bytes();
    let value = large.to_json();
    send(
        FutureRecord::to(&topic)
            .partition(3)
            .key(key.as_str())
            .payload(value.as_slice()),
    )
    .await?;
    s.ledger.push(record(
        &large.event_id,
        3,
        Expect::Park(ErrorReason::PayloadTooLarge),
        Some(key),
    ));
    s.timeline.note("poison: a 1.5 MB event");

    // 5. Forged retry state on the main topic: due in a century, attempts at the maximum.
    let forged = good("forged");
    let far = (i64::MAX / 2).to_string();
    let headers = [
        ("hookline-due-at", far.as_str()),
        ("hookline-attempt", "4294967295"),
        ("hookline-original-topic", "elsewhere"),
        ("hookline-original-partition", "0"),
        ("hookline-original-offset", "0"),
    ]
    .into_iter()
    .fold(OwnedHeaders::new(), |headers, (key, value)| {
        headers.insert(Header {
            key,
            value: Some(value),
        })
    });
    let value = forged.to_json();
    send(
        FutureRecord::to(&topic)
            .partition(4)
            .key("ok")
            .payload(value.as_slice())
            .headers(headers),
    )
    .await?;
    s.ledger
        .push(record(&forged.event_id, 4, Expect::Deliver, None));
    s.timeline
        .note("poison: forged hookline-due-at and hookline-attempt");
    Ok(forged.event_id)
}

/// Writes one record with kcat, with extra kcat arguments.
async fn kcat(
    s: &Scenario<'_>,
    topic: &str,
    partition: i32,
    key: &str,
    value: &[u8],
    extra: &[&OsStr],
) -> anyhow::Result<()> {
    let partition = partition.to_string();
    let mut child = tokio::process::Command::new("kcat")
        .args([
            "-P",
            "-b",
            &s.env.kafka.bootstrap_servers,
            "-t",
            topic,
            "-p",
            &partition,
            "-k",
            key,
        ])
        .args(extra)
        .stdin(Stdio::piped())
        .spawn()
        .context("running kcat (deploy/setup installs it)")?;
    let mut stdin = child.stdin.take().context("kcat's stdin")?;
    stdin.write_all(value).await.context("writing to kcat")?;
    drop(stdin);
    let status = child.wait().await.context("waiting for kcat")?;
    if !status.success() {
        bail!("kcat {extra:?} failed ({status})");
    }
    Ok(())
}
