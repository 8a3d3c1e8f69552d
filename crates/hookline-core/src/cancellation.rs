//! A cancellation: the value of a record in the compacted `<events>.cancellations` topic,
//! written by `hookline events cancel` and honoured by every dispatcher before each attempt.
//!
//! The record key is the event id (every delivery of the event: all the endpoints a tenant
//! event was fanned out to) or `EVENT_ID/ENDPOINT_ID` (the delivery to that endpoint), with
//! `%` and `/` in the event id percent-encoded (`%25`, `%2F`) so that no two cancellations
//! share a key. The value is JSON:
//!
//! ```json
//! {"event_id": "evt_1", "endpoint_id": "ep-orders", "reason": "order refunded",
//!  "cancelled_at_ms": 1764583200000, "cancelled_by": "alice"}
//! ```
//!
//! `endpoint_id`, `reason` and `cancelled_by` are optional. A tombstone (the key with no
//! value) withdraws the cancellation: deliveries attempted after it is seen go ahead.

use serde::{Deserialize, Serialize};

/// Longest `reason` and `cancelled_by`, in bytes.
pub const MAX_CANCELLATION_TEXT_LEN: usize = 512;
/// Longest `event_id` and `endpoint_id`, in bytes (as in an event).
pub const MAX_CANCELLATION_ID_LEN: usize = crate::event::MAX_ID_LEN;

/// One cancellation, as written to the cancellations topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cancellation {
    /// The cancelled event.
    pub event_id: String,
    /// The one endpoint whose delivery is cancelled; `None`: every delivery of the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_id: Option<String>,
    /// Why, in the operator's words (shown in the DLQ record's message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was cancelled, milliseconds since the Unix epoch.
    pub cancelled_at_ms: i64,
    /// Who cancelled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_by: Option<String>,
}

/// What is wrong with a cancellation record, naming the field (never a value).
#[derive(Debug, thiserror::Error)]
pub enum CancellationError {
    /// The value is not JSON of the cancellation shape.
    #[error("invalid cancellation JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// A field is empty, too long or holds characters it may not.
    #[error("field `{field}` {problem}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The record key is not the key of the value's event and endpoint.
    #[error("the record key is not the key of the cancellation's event_id and endpoint_id")]
    KeyMismatch,
}

/// The record key of the cancellation of `event_id` (to `endpoint_id`, or to every
/// endpoint when `None`).
pub fn cancellation_key(event_id: &str, endpoint_id: Option<&str>) -> String {
    let mut key = String::with_capacity(event_id.len() + 1);
    for c in event_id.chars() {
        match c {
            '%' => key.push_str("%25"),
            '/' => key.push_str("%2F"),
            c => key.push(c),
        }
    }
    if let Some(endpoint) = endpoint_id {
        key.push('/');
        key.push_str(endpoint);
    }
    key
}

impl Cancellation {
    /// Its record key.
    pub fn key(&self) -> String {
        cancellation_key(&self.event_id, self.endpoint_id.as_deref())
    }

    /// Its JSON value.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a struct of strings and numbers always serializes")
    }

    /// Reads and validates the value of a record whose key is `key`.
    pub fn from_record(key: &[u8], value: &[u8]) -> Result<Self, CancellationError> {
        let cancellation: Cancellation =
            serde_json::from_slice(value).map_err(CancellationError::Json)?;
        cancellation.validate()?;
        if cancellation.key().as_bytes() != key {
            return Err(CancellationError::KeyMismatch);
        }
        Ok(cancellation)
    }

    /// Checks the fields: ids as in an event (`event_id` visible ASCII without `.`), texts
    /// at most [`MAX_CANCELLATION_TEXT_LEN`] bytes without control characters.
    pub fn validate(&self) -> Result<(), CancellationError> {
        let invalid = |field, problem| CancellationError::Invalid { field, problem };
        check("event_id", &self.event_id, MAX_CANCELLATION_ID_LEN)?;
        if !self
            .event_id
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'.')
        {
            return Err(invalid(
                "event_id",
                "must be visible ASCII without spaces or `.`",
            ));
        }
        if let Some(endpoint) = &self.endpoint_id {
            check("endpoint_id", endpoint, MAX_CANCELLATION_ID_LEN)?;
        }
        if let Some(reason) = &self.reason {
            check("reason", reason, MAX_CANCELLATION_TEXT_LEN)?;
        }
        if let Some(by) = &self.cancelled_by {
            check("cancelled_by", by, MAX_CANCELLATION_TEXT_LEN)?;
        }
        Ok(())
    }
}

fn check(field: &'static str, value: &str, max: usize) -> Result<(), CancellationError> {
    let problem = if value.is_empty() {
        "must not be empty"
    } else if value.len() > max {
        "is too long"
    } else if value.chars().any(char::is_control) {
        "must not contain control characters"
    } else {
        return Ok(());
    };
    Err(CancellationError::Invalid { field, problem })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Cancellation {
        Cancellation {
            event_id: "evt_1".into(),
            endpoint_id: Some("ep-orders".into()),
            reason: Some("order refunded".into()),
            cancelled_at_ms: 1_764_583_200_000,
            cancelled_by: Some("alice".into()),
        }
    }

    #[test]
    fn keys_name_the_event_or_the_delivery_and_never_collide() {
        assert_eq!(cancellation_key("evt_1", None), "evt_1");
        assert_eq!(cancellation_key("evt_1", Some("ep")), "evt_1/ep");
        // An event id with a `/` cannot pass for an event and endpoint pair.
        assert_eq!(cancellation_key("a/b", None), "a%2Fb");
        assert_ne!(
            cancellation_key("a/b", None),
            cancellation_key("a", Some("b"))
        );
        assert_eq!(cancellation_key("a%2Fb", None), "a%252Fb");
        assert_ne!(
            cancellation_key("a%2Fb", None),
            cancellation_key("a/b", None)
        );
    }

    #[test]
    fn json_round_trips_with_its_key() {
        let c = sample();
        let back = Cancellation::from_record(c.key().as_bytes(), &c.to_json()).expect("reads");
        assert_eq!(back, c);
        let whole = Cancellation {
            endpoint_id: None,
            reason: None,
            cancelled_by: None,
            ..sample()
        };
        assert_eq!(
            String::from_utf8(whole.to_json()).expect("utf-8"),
            r#"{"event_id":"evt_1","cancelled_at_ms":1764583200000}"#
        );
        assert_eq!(
            Cancellation::from_record(b"evt_1", &whole.to_json()).expect("reads"),
            whole
        );
    }

    #[test]
    fn bad_records_are_refused_naming_the_field() {
        let c = sample();
        assert!(matches!(
            Cancellation::from_record(b"evt_1", &c.to_json()),
            Err(CancellationError::KeyMismatch)
        ));
        assert!(matches!(
            Cancellation::from_record(b"evt_1", b"{\"event_id\":\"evt_1\"}"),
            Err(CancellationError::Json(_))
        ));
        assert!(matches!(
            Cancellation::from_record(b"x", b"\xff\xfe"),
            Err(CancellationError::Json(_))
        ));
        let dotted = Cancellation {
            event_id: "a.b".into(),
            ..sample()
        };
        let error = dotted.validate().expect_err("refused");
        assert!(error.to_string().contains("`event_id`"), "{error}");
        let long = Cancellation {
            reason: Some("r".repeat(MAX_CANCELLATION_TEXT_LEN + 1)),
            ..sample()
        };
        assert!(matches!(
            long.validate(),
            Err(CancellationError::Invalid {
                field: "reason",
                ..
            })
        ));
        let unknown = br#"{"event_id":"e","cancelled_at_ms":1,"extra":true}"#;
        assert!(Cancellation::from_record(b"e", unknown).is_err());
    }
}
