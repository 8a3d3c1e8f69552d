//! An owned copy of a consumed record, so that a delivery task can outlive the poll.

use hookline_core::headers::{DeliveryMeta, HeaderError};
use rdkafka::message::{BorrowedMessage, Headers, Message};

use crate::offsets::PartitionKey;

/// A consumed record.
#[derive(Clone, Debug)]
pub struct SourceRecord {
    /// Its topic (the main topic or a retry tier).
    pub topic: String,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// The key bytes (the endpoint id).
    pub key: Option<Vec<u8>>,
    /// The value bytes, exactly as produced.
    pub value: Option<Vec<u8>>,
    /// Every header, in order.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl SourceRecord {
    /// Copies a consumed message.
    pub fn from_message(message: &BorrowedMessage<'_>) -> Self {
        let headers = message
            .headers()
            .map(|headers| {
                headers
                    .iter()
                    .map(|header| (header.key.to_owned(), header.value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default();
        SourceRecord {
            topic: message.topic().to_owned(),
            partition: message.partition(),
            offset: message.offset(),
            key: message.key().map(<[u8]>::to_vec),
            value: message.payload().map(<[u8]>::to_vec),
            headers,
        }
    }

    /// Its topic and partition.
    pub fn partition_key(&self) -> PartitionKey {
        (self.topic.clone(), self.partition)
    }

    /// The value of the last header named `name`.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .and_then(|(_, value)| value.as_deref())
    }

    /// hookline's delivery headers, `None` for a record that was never attempted.
    pub fn meta(&self) -> Result<Option<DeliveryMeta>, HeaderError> {
        DeliveryMeta::from_headers(
            self.headers
                .iter()
                .map(|(key, value)| (key.as_str(), value.as_deref())),
        )
    }
}
