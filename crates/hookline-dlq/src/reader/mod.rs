//! Reading the DLQ topic: every partition, from the beginning or from the offsets and times
//! a filter names, to the high watermarks or following; each value decoded through the
//! registry into a [`DlqRecord`], or reported as [`Undecodable`].

mod raw;

use std::sync::Arc;
use std::time::Duration;

use hookline_core::envelope::DlqEnvelope;
use hookline_kafka::{KafkaSettings, Registry, read_headers};
use rdkafka::message::{Message, OwnedMessage};

pub use raw::{Start, TopicReader, topic_exists};

use crate::error::{DlqError, Result};
use crate::filter::Filter;
use crate::record::{DlqRecord, ReadItem, Undecodable};

/// Records are produced a little after the envelope's `error_timestamp`; seeking by time
/// starts this much earlier so that clock skew between hosts loses nothing.
const TIME_SEEK_MARGIN_MS: i64 = 5 * 60_000;

/// How to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Keep reading new records instead of stopping at the high watermarks.
    pub follow: bool,
    /// How long a partition may yield nothing before its high watermark is reached.
    pub idle_timeout: Duration,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            follow: false,
            idle_timeout: Duration::from_secs(30),
        }
    }
}

/// Where reading starts in a partition, from the filter's partition, offset and time
/// criteria; `None` when the partition cannot hold a selected record.
pub fn start_for(filter: &Filter, partition: i32) -> Option<Start> {
    if !filter.wants_partition(partition) {
        return None;
    }
    Some(match (filter.first_offset(partition), filter.since_ms) {
        (Some(offset), _) => Start::Offset(offset),
        (None, Some(since)) => Start::Time(since.saturating_sub(TIME_SEEK_MARGIN_MS)),
        (None, None) => Start::Beginning,
    })
}

/// A reader of the DLQ topic that decodes through the registry.
pub struct DlqReader {
    raw: TopicReader,
    registry: Arc<Registry>,
}

impl DlqReader {
    /// Opens `topic` for the records `filter` can select. Fails with
    /// [`DlqError::TopicNotFound`] when the topic does not exist and [`DlqError::Registry`]
    /// when the registry cannot be reached, before anything is read.
    pub async fn open(
        kafka: &KafkaSettings,
        registry: Arc<Registry>,
        topic: &str,
        filter: &Filter,
        options: ReadOptions,
    ) -> Result<DlqReader> {
        let for_start = filter.clone();
        let raw = TopicReader::open(
            kafka,
            topic,
            options.follow,
            options.idle_timeout,
            move |partition| start_for(&for_start, partition),
        )
        .await?;
        registry.ping().await.map_err(|source| DlqError::Registry {
            context: "DLQ records are decoded through the schema registry, which did not answer"
                .to_owned(),
            source: Box::new(source),
        })?;
        Ok(DlqReader { raw, registry })
    }

    /// The topic read.
    pub fn topic(&self) -> &str {
        self.raw.topic()
    }

    /// The next record, decoded or not; `None` at the end (never when following). A
    /// registry that cannot be reached is an error, not an undecodable record.
    pub async fn next(&mut self) -> Result<Option<ReadItem>> {
        let Some(message) = self.raw.next().await? else {
            return Ok(None);
        };
        decode(&self.registry, &message).await.map(Some)
    }
}

/// Decodes one DLQ record.
pub async fn decode(registry: &Registry, message: &OwnedMessage) -> Result<ReadItem> {
    let timestamp_ms = message.timestamp().to_millis();
    let undecodable = |error: String| {
        ReadItem::Undecodable(Undecodable {
            partition: message.partition(),
            offset: message.offset(),
            timestamp_ms,
            key: message.key().map(<[u8]>::to_vec),
            error,
        })
    };
    let Some(bytes) = message.payload() else {
        return Ok(undecodable("the record has no value".to_owned()));
    };
    if bytes.len() < 5 || bytes[0] != 0 {
        return Ok(undecodable(
            "the value is not Confluent-framed Avro (no magic byte 0 and schema id)".to_owned(),
        ));
    }
    let value = match registry.decode(bytes).await {
        Ok(value) => value,
        Err(source) if source.is_transient() => {
            return Err(DlqError::Registry {
                context: format!(
                    "decoding DLQ record {}/{} through the schema registry",
                    message.partition(),
                    message.offset()
                ),
                source: Box::new(source),
            });
        }
        Err(error) => return Ok(undecodable(error_chain(&error))),
    };
    let envelope = match DlqEnvelope::from_avro_value(value) {
        Ok(envelope) => envelope,
        Err(error) => return Ok(undecodable(format!("not a DLQ envelope: {error}"))),
    };
    // Read as bytes: a header name that is not UTF-8 is shown lossily, never a panic.
    let headers = read_headers(message)
        .into_iter()
        .map(|header| {
            let name = header.name_lossy().into_owned();
            (name, header.value)
        })
        .collect();
    Ok(ReadItem::Record(Box::new(DlqRecord {
        partition: message.partition(),
        offset: message.offset(),
        timestamp_ms,
        key: message.key().map(<[u8]>::to_vec),
        headers,
        envelope,
    })))
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::FilterSpec;

    #[test]
    fn starts_follow_the_filter() {
        let all = Filter::default();
        assert_eq!(start_for(&all, 3), Some(Start::Beginning));
        let offsets = FilterSpec {
            partitions: vec![1],
            from_offset: Some(5),
            since: Some("2024-05-01T00:00:00Z".into()),
            ..FilterSpec::default()
        }
        .build(0)
        .expect("valid");
        assert_eq!(start_for(&offsets, 0), None);
        assert_eq!(start_for(&offsets, 1), Some(Start::Offset(5)));
        let since = FilterSpec {
            since: Some("2024-05-01T00:00:00Z".into()),
            ..FilterSpec::default()
        }
        .build(0)
        .expect("valid");
        assert_eq!(
            start_for(&since, 0),
            Some(Start::Time(1_714_521_600_000 - TIME_SEEK_MARGIN_MS))
        );
    }
}
