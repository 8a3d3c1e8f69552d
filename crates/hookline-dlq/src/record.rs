//! What reading the DLQ yields: decoded records, and records that could not be decoded.

use std::fmt;
use std::str::FromStr;

use hookline_core::envelope::DlqEnvelope;

/// One Kafka header of a DLQ record (the original headers plus hookline's own).
pub type Header = (String, Option<Vec<u8>>);

/// A DLQ record decoded through the registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DlqRecord {
    /// Partition of the DLQ topic.
    pub partition: i32,
    /// Offset in that partition.
    pub offset: i64,
    /// The record's timestamp, epoch milliseconds, when it has one.
    pub timestamp_ms: Option<i64>,
    /// The record's key (the original key).
    pub key: Option<Vec<u8>>,
    /// The record's headers, in order.
    pub headers: Vec<Header>,
    /// The decoded envelope.
    pub envelope: DlqEnvelope,
}

impl DlqRecord {
    /// Where the record sits in the DLQ topic.
    pub fn place(&self) -> RecordRef {
        RecordRef {
            partition: self.partition,
            offset: self.offset,
        }
    }
}

/// A DLQ record whose value is not a readable envelope (not framed Avro, an unknown schema
/// id, or an Avro value that is not a `DlqEnvelope`). Reported, never silently skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undecodable {
    /// Partition of the DLQ topic.
    pub partition: i32,
    /// Offset in that partition.
    pub offset: i64,
    /// The record's timestamp, epoch milliseconds, when it has one.
    pub timestamp_ms: Option<i64>,
    /// The record's key.
    pub key: Option<Vec<u8>>,
    /// Why it could not be decoded.
    pub error: String,
}

/// One item read from the DLQ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadItem {
    /// A record with its decoded envelope.
    Record(Box<DlqRecord>),
    /// A record that could not be decoded.
    Undecodable(Undecodable),
}

impl ReadItem {
    /// Where the item sits in the DLQ topic.
    pub fn place(&self) -> RecordRef {
        match self {
            ReadItem::Record(record) => record.place(),
            ReadItem::Undecodable(u) => RecordRef {
                partition: u.partition,
                offset: u.offset,
            },
        }
    }
}

/// A DLQ record's place, written `<partition>/<offset>`: the key of its actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecordRef {
    /// Partition of the DLQ topic.
    pub partition: i32,
    /// Offset in that partition.
    pub offset: i64,
}

impl fmt::Display for RecordRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.partition, self.offset)
    }
}

/// A string that is not `<partition>/<offset>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not <partition>/<offset> (e.g. 0/42)")]
pub struct InvalidRecordRef(pub String);

impl FromStr for RecordRef {
    type Err = InvalidRecordRef;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidRecordRef(s.to_owned());
        let (partition, offset) = s.trim().split_once('/').ok_or_else(invalid)?;
        let partition: i32 = partition.parse().map_err(|_| invalid())?;
        let offset: i64 = offset.parse().map_err(|_| invalid())?;
        if partition < 0 || offset < 0 {
            return Err(invalid());
        }
        Ok(RecordRef { partition, offset })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_refs_round_trip() {
        let r: RecordRef = "3/42".parse().expect("valid");
        assert_eq!(
            r,
            RecordRef {
                partition: 3,
                offset: 42
            }
        );
        assert_eq!(r.to_string(), "3/42");
        for bad in ["3", "a/1", "1/b", "-1/0", "0/-5", "1/2/3", ""] {
            assert!(bad.parse::<RecordRef>().is_err(), "{bad}");
        }
    }
}

/// Records for unit tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use hookline_core::envelope::{DlqEnvelope, DlqHeader, ENVELOPE_VERSION, ErrorReason};

    use super::DlqRecord;

    /// An envelope parked at `at_ms` for `endpoint` with `reason`.
    pub fn envelope(endpoint: &str, reason: ErrorReason, at_ms: i64) -> DlqEnvelope {
        DlqEnvelope {
            envelope_version: ENVELOPE_VERSION,
            event_id: format!("evt-{endpoint}-{at_ms}"),
            event_type: Some("invoice.paid".into()),
            endpoint_id: Some(endpoint.into()),
            endpoint_url: Some("https://example.com/hook".into()),
            original_topic: "webhook-events".into(),
            original_partition: 0,
            original_offset: 7,
            original_key: Some(endpoint.as_bytes().to_vec()),
            original_payload_bytes: br#"{"event_id":"x","n":1}"#.to_vec(),
            original_headers: vec![DlqHeader {
                key: "webhook-id".into(),
                value: Some(b"x".to_vec()),
            }],
            error_reason: reason,
            error_message: "HTTP 503".into(),
            last_status_code: Some(503),
            attempts: 3,
            first_attempt_at_ms: Some(at_ms - 1_000),
            error_timestamp_ms: at_ms,
            dispatcher_id: "d-1".into(),
            original_payload_truncated: false,
            original_payload_size: None,
            tenant_id: None,
        }
    }

    /// A record at `partition/offset` holding [`envelope`].
    pub fn record(
        partition: i32,
        offset: i64,
        endpoint: &str,
        reason: ErrorReason,
        at_ms: i64,
    ) -> DlqRecord {
        DlqRecord {
            partition,
            offset,
            timestamp_ms: Some(at_ms + 5),
            key: Some(endpoint.as_bytes().to_vec()),
            headers: vec![
                ("webhook-id".into(), Some(b"x".to_vec())),
                ("hookline-attempt".into(), Some(b"3".to_vec())),
            ],
            envelope: envelope(endpoint, reason, at_ms),
        }
    }
}
