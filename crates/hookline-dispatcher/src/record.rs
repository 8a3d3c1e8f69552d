//! An owned copy of a consumed record, so that a delivery task can outlive the poll. Its
//! headers are read through hookline-kafka's reader, never rdkafka's accessor, which panics
//! on a header name that is not UTF-8.

use hookline_kafka::read_headers;
use rdkafka::message::{BorrowedMessage, Message};

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
    /// Every header, in order; a name that is not UTF-8 is kept lossily and flagged in
    /// `bad_header_name`.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// The first header name that is not UTF-8, lossily, when there is one: such a record is
    /// parked as malformed.
    pub bad_header_name: Option<String>,
}

impl SourceRecord {
    /// Copies a consumed message.
    pub fn from_message(message: &BorrowedMessage<'_>) -> Self {
        let mut bad_header_name = None;
        let headers = read_headers(message)
            .into_iter()
            .map(|header| {
                let name = match String::from_utf8(header.name) {
                    Ok(name) => name,
                    Err(error) => {
                        let lossy = String::from_utf8_lossy(error.as_bytes()).into_owned();
                        bad_header_name.get_or_insert_with(|| lossy.clone());
                        lossy
                    }
                };
                (name, header.value)
            })
            .collect();
        SourceRecord {
            topic: message.topic().to_owned(),
            partition: message.partition(),
            offset: message.offset(),
            key: message.key().map(<[u8]>::to_vec),
            value: message.payload().map(<[u8]>::to_vec),
            headers,
            bad_header_name,
        }
    }

    /// Its topic and partition.
    pub fn partition_key(&self) -> PartitionKey {
        (self.topic.clone(), self.partition)
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
