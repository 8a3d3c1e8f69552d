//! Bounded reads of the attempt log and the DLQ topic: each partition from the offset of
//! a time (`offsets_for_times`) to the high watermark seen at the start, never the whole
//! topic.

use std::sync::Arc;
use std::time::Duration;

use hookline_core::attempt_log::AttemptRecord;
use hookline_dlq::DlqError;
use hookline_dlq::reader::{Start, TopicReader};
use hookline_kafka::{KafkaSettings, Registry};
use rdkafka::message::{Message, Timestamp};
use serde::Serialize;

use super::error::{InsightError, Result};
use super::window::Window;

/// Records are written a little after the time they carry: reading starts this much before
/// the window, and records are then kept by their own time.
const SEEK_MARGIN_MS: i64 = 60_000;

/// What a read went through.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReadStats {
    /// The topic read.
    pub topic: String,
    /// Whether the topic exists (a missing one reads as empty).
    pub topic_exists: bool,
    /// Records read from Kafka (in the window or just before it).
    pub records_read: u64,
    /// Records whose value could not be decoded (left out).
    pub undecodable: u64,
    /// Whether reading stopped at the record limit before the end: the figures are partial.
    pub truncated: bool,
}

/// Reads the attempt-log records of `window` from `topic`, in partition order, handing
/// each to `visit`; at most `limit` records are read. A topic that does not exist reads
/// as empty; a registry that cannot be reached is an error.
pub async fn attempts_in(
    kafka: &KafkaSettings,
    registry: &Arc<Registry>,
    topic: &str,
    window: Window,
    limit: u64,
    idle_timeout: Duration,
    mut visit: impl FnMut(AttemptRecord),
) -> Result<ReadStats> {
    let (mut stats, reader) = open_counted(kafka, topic, window, idle_timeout).await?;
    let Some(mut reader) = reader else {
        return Ok(stats);
    };
    let read_error = |source| InsightError::Read {
        topic: topic.to_owned(),
        source: Box::new(source),
    };
    while let Some(message) = reader.next().await.map_err(read_error)? {
        if stats.records_read >= limit {
            stats.truncated = true;
            break;
        }
        stats.records_read += 1;
        let Some(bytes) = message.payload() else {
            stats.undecodable += 1;
            continue;
        };
        let value = match registry.decode(bytes).await {
            Ok(value) => value,
            Err(source) if source.is_transient() => {
                return Err(read_error(DlqError::Registry {
                    context: format!(
                        "decoding attempt record {}/{} through the schema registry",
                        message.partition(),
                        message.offset()
                    ),
                    source: Box::new(source),
                }));
            }
            Err(error) => {
                tracing::debug!(%error, offset = message.offset(), "an undecodable attempt record");
                stats.undecodable += 1;
                continue;
            }
        };
        match AttemptRecord::from_avro_value(value) {
            Ok(record) if window.contains(record.timestamp_ms) => visit(record),
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(%error, offset = message.offset(), "not an attempt record");
                stats.undecodable += 1;
            }
        }
    }
    Ok(stats)
}

/// Reads the Kafka timestamps of the records `topic` got in `window` (nothing decoded),
/// handing each to `visit`; at most `limit` records. A topic that does not exist reads as
/// empty.
pub async fn timestamps_in(
    kafka: &KafkaSettings,
    topic: &str,
    window: Window,
    limit: u64,
    idle_timeout: Duration,
    mut visit: impl FnMut(i64),
) -> Result<ReadStats> {
    let (mut stats, reader) = open_counted(kafka, topic, window, idle_timeout).await?;
    let Some(mut reader) = reader else {
        return Ok(stats);
    };
    while let Some(message) = reader.next().await.map_err(|source| InsightError::Read {
        topic: topic.to_owned(),
        source: Box::new(source),
    })? {
        if stats.records_read >= limit {
            stats.truncated = true;
            break;
        }
        stats.records_read += 1;
        match message.timestamp() {
            Timestamp::CreateTime(ms) | Timestamp::LogAppendTime(ms) if window.contains(ms) => {
                visit(ms);
            }
            Timestamp::CreateTime(_) | Timestamp::LogAppendTime(_) | Timestamp::NotAvailable => {}
        }
    }
    Ok(stats)
}

/// [`open`], with the stats of a read of `topic` started (a missing topic: read, empty).
async fn open_counted(
    kafka: &KafkaSettings,
    topic: &str,
    window: Window,
    idle_timeout: Duration,
) -> Result<(ReadStats, Option<TopicReader>)> {
    let reader = open(kafka, topic, window, idle_timeout).await?;
    let stats = ReadStats {
        topic: topic.to_owned(),
        topic_exists: reader.is_some(),
        ..ReadStats::default()
    };
    Ok((stats, reader))
}

/// A reader of `topic` from `window`'s start (less the margin); `None` when the topic does
/// not exist.
async fn open(
    kafka: &KafkaSettings,
    topic: &str,
    window: Window,
    idle_timeout: Duration,
) -> Result<Option<TopicReader>> {
    let from = window.since_ms.saturating_sub(SEEK_MARGIN_MS);
    match TopicReader::open(kafka, topic, false, idle_timeout, move |_| {
        Some(Start::Time(from))
    })
    .await
    {
        Ok(reader) => Ok(Some(reader)),
        Err(DlqError::TopicNotFound { .. }) => Ok(None),
        Err(source) => Err(InsightError::Read {
            topic: topic.to_owned(),
            source: Box::new(source),
        }),
    }
}
