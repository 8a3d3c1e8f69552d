//! Consumer lag of the dispatchers' group: per topic, the sum over its partitions of the
//! high watermark less the committed offset, read with a consumer that names the group but
//! never joins it (offset fetch only), off the async runtime.

use std::time::Duration;

use hookline_core::policy::parse_suffix;
use hookline_kafka::KafkaSettings;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use super::error::{InsightError, Result};

/// How long a metadata, watermark or committed-offsets request may take.
const KAFKA_TIMEOUT: Duration = Duration::from_secs(10);

/// The lag of one group on one topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TopicLag {
    /// The topic.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// Records not consumed yet, over every partition.
    pub lag: i64,
    /// The topic's partitions.
    pub partitions: u32,
    /// Partitions the group has committed nothing for (their whole retained log counts as lag).
    pub uncommitted_partitions: u32,
}

/// The dispatchers' lag: the events topic, each retry tier (`<events>.retry.*`, found in
/// the cluster's metadata) and the fan-out topic, as they exist.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LagReport {
    /// The dispatchers' group.
    pub group: String,
    /// One row per topic: the events topic first, then the tiers (shortest delay first),
    /// then fan-out.
    pub topics: Vec<TopicLag>,
    /// The sum over `topics`.
    pub total: i64,
}

/// The lag of one partition: the high watermark less the committed offset (or less the
/// low watermark when nothing is committed, as the group then starts at the earliest), never
/// below 0.
pub fn partition_lag(low: i64, high: i64, committed: Option<i64>) -> i64 {
    let from = committed.map_or(low, |offset| offset.max(low));
    high.saturating_sub(from).max(0)
}

/// The topics a dispatcher group reads, with their groups, among `existing` topic names:
/// `events` (group), `<events>.retry.*` (group, shortest delay first) and `<events>.fanout`
/// (`<group>.fanout`).
pub fn lag_topics(events: &str, group: &str, existing: &[String]) -> Vec<(String, String)> {
    let tier_prefix = format!("{events}.retry.");
    let mut tiers: Vec<&String> = existing
        .iter()
        .filter(|t| t.starts_with(&tier_prefix) && t.len() > tier_prefix.len())
        .collect();
    // Shortest delay first; a suffix that is not a delay after them, by name.
    tiers.sort_by_key(|t| {
        (
            parse_suffix(&t[tier_prefix.len()..])
                .ok()
                .unwrap_or(Duration::MAX),
            *t,
        )
    });
    let mut out = Vec::new();
    if existing.iter().any(|t| t == events) {
        out.push((events.to_owned(), group.to_owned()));
    }
    out.extend(tiers.into_iter().map(|t| (t.clone(), group.to_owned())));
    let fanout = format!("{events}.fanout");
    if existing.contains(&fanout) {
        out.push((fanout, format!("{group}.fanout")));
    }
    out
}

/// Reads the lag of `group` on `events` and its tiers (and of `<group>.fanout` on the
/// fan-out topic).
pub async fn consumer_lag(kafka: &KafkaSettings, events: &str, group: &str) -> Result<LagReport> {
    let kafka = kafka.clone();
    let (events, group) = (events.to_owned(), group.to_owned());
    // librdkafka's metadata, watermark and offset calls block the calling thread.
    tokio::task::spawn_blocking(move || blocking_lag(&kafka, &events, &group))
        .await
        .map_err(|join| InsightError::Kafka {
            context: format!("reading consumer lag: the task failed ({join})"),
            source: KafkaError::Canceled,
        })?
}

fn consumer_for(kafka: &KafkaSettings, group: &str) -> Result<BaseConsumer> {
    kafka
        .client_config()
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("allow.auto.create.topics", "false")
        .create()
        .map_err(InsightError::kafka(
            "creating a consumer to read committed offsets",
        ))
}

fn blocking_lag(kafka: &KafkaSettings, events: &str, group: &str) -> Result<LagReport> {
    let consumer = consumer_for(kafka, group)?;
    let metadata = consumer
        .fetch_metadata(None, KAFKA_TIMEOUT)
        .map_err(InsightError::kafka("reading the cluster's topics"))?;
    let existing: Vec<String> = metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .map(|t| t.name().to_owned())
        .collect();
    let mut rows = Vec::new();
    for (topic, topic_group) in lag_topics(events, group, &existing) {
        let partitions: Vec<i32> = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .map(|t| t.partitions().iter().map(|p| p.id()).collect())
            .unwrap_or_default();
        let reader = if topic_group == group {
            None
        } else {
            Some(consumer_for(kafka, &topic_group)?)
        };
        let row = topic_lag(
            reader.as_ref().unwrap_or(&consumer),
            &topic,
            &topic_group,
            &partitions,
        )?;
        rows.push(row);
    }
    let total = rows
        .iter()
        .fold(0_i64, |sum, row| sum.saturating_add(row.lag));
    Ok(LagReport {
        group: group.to_owned(),
        topics: rows,
        total,
    })
}

fn topic_lag(
    consumer: &BaseConsumer,
    topic: &str,
    group: &str,
    partitions: &[i32],
) -> Result<TopicLag> {
    let mut list = TopicPartitionList::new();
    for &partition in partitions {
        list.add_partition(topic, partition);
    }
    let committed =
        consumer
            .committed_offsets(list, KAFKA_TIMEOUT)
            .map_err(InsightError::kafka(format!(
                "reading the offsets {group} committed on {topic}"
            )))?;
    let mut row = TopicLag {
        topic: topic.to_owned(),
        group: group.to_owned(),
        lag: 0,
        partitions: u32::try_from(partitions.len()).unwrap_or(u32::MAX),
        uncommitted_partitions: 0,
    };
    for &partition in partitions {
        let (low, high) = consumer
            .fetch_watermarks(topic, partition, KAFKA_TIMEOUT)
            .map_err(InsightError::kafka(format!(
                "reading the watermarks of {topic} partition {partition}"
            )))?;
        let offset = committed
            .find_partition(topic, partition)
            .and_then(|element| match element.offset() {
                Offset::Offset(offset) => Some(offset),
                _ => None,
            });
        if offset.is_none() {
            row.uncommitted_partitions += 1;
        }
        row.lag = row.lag.saturating_add(partition_lag(low, high, offset));
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_what_lies_past_the_commit() {
        assert_eq!(partition_lag(0, 10, Some(4)), 6);
        assert_eq!(partition_lag(0, 10, Some(10)), 0);
        // Nothing committed: everything retained.
        assert_eq!(partition_lag(3, 10, None), 7);
        // A commit below the retained log counts from the log's start.
        assert_eq!(partition_lag(5, 10, Some(2)), 5);
        // Never negative.
        assert_eq!(partition_lag(0, 10, Some(12)), 0);
    }

    #[test]
    fn the_group_reads_the_events_topic_its_tiers_and_fan_out() {
        let existing: Vec<String> = [
            "ev.retry.1m",
            "ev",
            "ev.retry.5s",
            "ev.dlq",
            "ev.attempts",
            "ev.fanout",
            "ev.retry.",
            "other.retry.5s",
            "ev2",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(
            lag_topics("ev", "g", &existing),
            [
                ("ev".to_owned(), "g".to_owned()),
                ("ev.retry.5s".to_owned(), "g".to_owned()),
                ("ev.retry.1m".to_owned(), "g".to_owned()),
                ("ev.fanout".to_owned(), "g.fanout".to_owned()),
            ]
        );
        assert!(lag_topics("missing", "g", &existing).is_empty());
    }
}
