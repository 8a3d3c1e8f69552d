//! An owned copy of a consumed record, so that a delivery task can outlive the poll. Its
//! headers are read through hookline-kafka's reader, never rdkafka's accessor, which panics
//! on a header name that is not UTF-8.

use std::sync::Arc;

use hookline_core::headers::{PUBLISHED_AT, REDRIVEN_FROM, is_delivery_header};
use hookline_kafka::read_headers;
use rdkafka::message::{BorrowedMessage, Message};

use crate::fast::FastSet;
use crate::offsets::PartitionKey;

/// The most bytes of a `hookline-redriven-from` value the attempt log keeps.
pub const MAX_REDRIVEN_FROM_LEN: usize = 512;

/// The topics records were read from, each name kept once: a record and every partition
/// key made from it share their topic's name rather than copying it (four copies a
/// delivery before).
#[derive(Debug, Default)]
pub struct TopicNames(FastSet<Arc<str>>);

impl TopicNames {
    /// The shared name of `topic`.
    pub fn get(&mut self, topic: &str) -> Arc<str> {
        if let Some(name) = self.0.get(topic) {
            return Arc::clone(name);
        }
        let name: Arc<str> = Arc::from(topic);
        self.0.insert(Arc::clone(&name));
        name
    }
}

/// A consumed record.
#[derive(Clone, Debug)]
pub struct SourceRecord {
    /// Its topic (the main topic or a retry tier), shared with the other records of the
    /// topic ([`TopicNames`]) and the partition keys made from it.
    pub topic: Arc<str>,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// The key bytes (the endpoint id).
    pub key: Option<Vec<u8>>,
    /// The value bytes, exactly as produced.
    pub value: Option<Vec<u8>>,
    /// Every header, in order; a name that is not UTF-8 is kept lossily and flagged in
    /// `bad_header_name`.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// The first header name that is not UTF-8, lossily, when there is one: such a record is
    /// parked as malformed.
    pub bad_header_name: Option<String>,
}

impl SourceRecord {
    /// Copies a consumed message; its topic's name is taken from `topics`.
    pub fn from_message(message: &BorrowedMessage<'_>, topics: &mut TopicNames) -> Self {
        let mut bad_header_name = None;
        let read = read_headers(message);
        // Room for the publish time that a fresh record is stamped with below.
        let mut headers = Vec::with_capacity(read.len() + 1);
        headers.extend(read.into_iter().map(|header| {
            let name = match String::from_utf8(header.name) {
                Ok(name) => name,
                Err(error) => {
                    let lossy = String::from_utf8_lossy(error.as_bytes()).into_owned();
                    bad_header_name.get_or_insert_with(|| lossy.clone());
                    lossy
                }
            };
            (name, header.value)
        }));
        let mut record = SourceRecord {
            topic: topics.get(message.topic()),
            partition: message.partition(),
            offset: message.offset(),
            key: message.key().map(<[u8]>::to_vec),
            value: message.payload().map(<[u8]>::to_vec),
            headers,
            bad_header_name,
        };
        record.stamp_published_at(message.timestamp().to_millis());
        record
    }

    /// Adds `hookline-published-at` (the record's own Kafka timestamp) to a fresh record: one
    /// without hookline's retry headers, without a publish time already (a fanned-out
    /// delivery, a redrive) and not redriven (a redrive of a record parked before the header
    /// existed has no known publish time). The header then travels with the record's tier
    /// copies and its DLQ envelope, for the attempt log.
    pub(crate) fn stamp_published_at(&mut self, timestamp_ms: Option<i64>) {
        let Some(timestamp_ms) = timestamp_ms else {
            return;
        };
        let fresh = !self.headers.iter().any(|(name, _)| {
            is_delivery_header(name) || name == PUBLISHED_AT || name == REDRIVEN_FROM
        });
        if fresh {
            self.headers.push((
                PUBLISHED_AT.to_owned(),
                Some(timestamp_ms.to_string().into_bytes()),
            ));
        }
    }

    /// When the event was first published (`hookline-published-at`), when known.
    pub fn published_at_ms(&self) -> Option<i64> {
        std::str::from_utf8(self.header(PUBLISHED_AT)?)
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The DLQ record this delivery was redriven from (`hookline-redriven-from`), at most
    /// [`MAX_REDRIVEN_FROM_LEN`] bytes of it.
    pub fn redriven_from(&self) -> Option<String> {
        let value = String::from_utf8_lossy(self.header(REDRIVEN_FROM)?);
        let mut end = value.len().min(MAX_REDRIVEN_FROM_LEN);
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        Some(value[..end].to_owned())
    }

    /// Its topic and partition.
    pub fn partition_key(&self) -> PartitionKey {
        (Arc::clone(&self.topic), self.partition)
    }

    /// The key as text, when it is UTF-8 (the endpoint id).
    pub fn key_str(&self) -> Option<&str> {
        self.key
            .as_deref()
            .and_then(|key| std::str::from_utf8(key).ok())
    }

    /// The value of the last header named `name`.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .and_then(|(_, value)| value.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(headers: &[(&str, &str)]) -> SourceRecord {
        SourceRecord {
            topic: "ev".into(),
            partition: 0,
            offset: 1,
            key: None,
            value: None,
            headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), Some(v.as_bytes().to_vec())))
                .collect(),
            bad_header_name: None,
        }
    }

    #[test]
    fn a_fresh_record_is_stamped_with_its_own_timestamp_once() {
        let mut fresh = record(&[("traceparent", "00-x")]);
        fresh.stamp_published_at(Some(1_000));
        fresh.stamp_published_at(Some(2_000));
        assert_eq!(fresh.published_at_ms(), Some(1_000));
        assert_eq!(fresh.headers.len(), 2);
    }

    #[test]
    fn tier_records_and_redrives_keep_the_first_publish_time() {
        let mut tier = record(&[("hookline-attempt", "1"), (PUBLISHED_AT, "1000")]);
        tier.stamp_published_at(Some(9_000));
        assert_eq!(tier.published_at_ms(), Some(1_000));
        let mut old_tier = record(&[("hookline-attempt", "1")]);
        old_tier.stamp_published_at(Some(9_000));
        assert_eq!(
            old_tier.published_at_ms(),
            None,
            "a tier copy's time is not the publish time"
        );
        let mut redriven = record(&[(REDRIVEN_FROM, "ev.dlq/0/3"), (PUBLISHED_AT, "1000")]);
        redriven.stamp_published_at(Some(9_000));
        assert_eq!(redriven.published_at_ms(), Some(1_000));
        assert_eq!(redriven.redriven_from().as_deref(), Some("ev.dlq/0/3"));
        let mut old_redrive = record(&[(REDRIVEN_FROM, "ev.dlq/0/3")]);
        old_redrive.stamp_published_at(Some(9_000));
        assert_eq!(
            old_redrive.published_at_ms(),
            None,
            "the redrive time is not it"
        );
    }

    #[test]
    fn outside_values_are_read_without_panics_and_bounded() {
        let bad = record(&[(PUBLISHED_AT, "soon"), (REDRIVEN_FROM, &"é".repeat(600))]);
        assert_eq!(bad.published_at_ms(), None);
        let from = bad.redriven_from().expect("present");
        assert!(from.len() <= MAX_REDRIVEN_FROM_LEN && from.len() >= MAX_REDRIVEN_FROM_LEN - 1);
    }

    #[test]
    fn a_topics_records_share_one_name_and_keep_it_apart_from_others() {
        let mut topics = TopicNames::default();
        let first = topics.get("webhook-events");
        let again = topics.get("webhook-events");
        let tier = topics.get("webhook-events.retry.1s");
        assert!(Arc::ptr_eq(&first, &again), "one copy of a name");
        assert_eq!(&*tier, "webhook-events.retry.1s");
        let record = SourceRecord {
            topic: first,
            ..record(&[])
        };
        let (topic, partition) = record.partition_key();
        assert!(Arc::ptr_eq(&topic, &again), "the key shares it too");
        assert_eq!((&*topic, partition), ("webhook-events", 0));
    }
}
