//! The notices: their types, their bodies (Standard Webhooks' `{type, timestamp, data}`)
//! and their deterministic ids. Pure: no I/O, time passed in.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::config::NoticeType;

/// One notice about one endpoint (its subject).
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    /// Its type.
    pub kind: NoticeType,
    /// The endpoint it is about.
    pub subject: String,
    /// When it happened, epoch ms.
    pub at_ms: i64,
    /// What makes it one occurrence on every replica: `None` for the time window of
    /// `at_ms`; `Some` for something the replicas share (the time of the disable that an
    /// enable ends).
    pub occurrence: Option<i64>,
    /// The `data` of the body.
    pub data: Value,
}

/// What a parked delivery's notice says.
#[derive(Clone, Debug, Default)]
pub struct Parked<'a> {
    pub event_id: &'a str,
    pub endpoint_id: &'a str,
    pub tenant_id: Option<&'a str>,
    /// The DLQ reason code.
    pub reason: &'a str,
    pub dlq_topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    /// Attempts made.
    pub attempts: u32,
    pub last_status: Option<u16>,
    /// The failure's account (URLs are taken out).
    pub last_error: &'a str,
}

/// Most bytes of `last_error` a notice carries.
const MAX_ERROR_LEN: usize = 512;

impl Notice {
    /// `delivery.parked`: no URL, no payload.
    pub fn parked(parked: &Parked<'_>, at_ms: i64) -> Notice {
        let mut error = without_urls(parked.last_error);
        cut(&mut error, MAX_ERROR_LEN);
        Notice {
            kind: NoticeType::DeliveryParked,
            subject: parked.endpoint_id.to_owned(),
            at_ms,
            occurrence: None,
            data: json!({
                "event_id": parked.event_id,
                "endpoint_id": parked.endpoint_id,
                "tenant_id": parked.tenant_id,
                "reason": parked.reason,
                "dlq_topic": parked.dlq_topic,
                "partition": parked.partition,
                "offset": parked.offset,
                "attempts": parked.attempts,
                "last_status": parked.last_status,
                "last_error": error,
            }),
        }
    }

    /// `endpoint.circuit_opened`: `failures` of `requests` attempts failed.
    pub fn circuit_opened(endpoint_id: &str, failures: u32, requests: u32, at_ms: i64) -> Notice {
        Notice {
            kind: NoticeType::CircuitOpened,
            subject: endpoint_id.to_owned(),
            at_ms,
            occurrence: None,
            data: json!({
                "endpoint_id": endpoint_id,
                "failures": failures,
                "requests": requests,
                "opened_at": rfc3339(at_ms),
            }),
        }
    }

    /// `endpoint.circuit_closed`, with when it had opened (if this replica saw it).
    pub fn circuit_closed(endpoint_id: &str, opened_at_ms: Option<i64>, at_ms: i64) -> Notice {
        Notice {
            kind: NoticeType::CircuitClosed,
            subject: endpoint_id.to_owned(),
            at_ms,
            occurrence: None,
            data: json!({
                "endpoint_id": endpoint_id,
                "opened_at": opened_at_ms.map(rfc3339),
                "closed_at": rfc3339(at_ms),
            }),
        }
    }

    /// `endpoint.disabled` for `reason` (`gone: HTTP 410`, `failing: timeout`).
    pub fn disabled(endpoint_id: &str, reason: &str, disabled_at_ms: i64) -> Notice {
        Notice {
            kind: NoticeType::EndpointDisabled,
            subject: endpoint_id.to_owned(),
            at_ms: disabled_at_ms,
            occurrence: Some(disabled_at_ms),
            data: json!({
                "endpoint_id": endpoint_id,
                "reason": reason,
                "disabled_at": rfc3339(disabled_at_ms),
            }),
        }
    }

    /// `endpoint.enabled`, ending the disable of `disabled_at_ms` for `reason` (as the
    /// disabled config said; every replica reads the same).
    pub fn enabled(
        endpoint_id: &str,
        reason: Option<&str>,
        disabled_at_ms: Option<i64>,
        at_ms: i64,
    ) -> Notice {
        Notice {
            kind: NoticeType::EndpointEnabled,
            subject: endpoint_id.to_owned(),
            at_ms,
            occurrence: disabled_at_ms,
            data: json!({
                "endpoint_id": endpoint_id,
                "disabled_reason": reason,
                "disabled_at": disabled_at_ms.map(rfc3339),
                "enabled_at": rfc3339(at_ms),
            }),
        }
    }

    /// Which occurrence this is, with windows of `window_ms` (at least 1): the replicas
    /// that notice the same thing agree on it.
    pub fn occurrence(&self, window_ms: u64) -> i64 {
        self.occurrence.unwrap_or_else(|| {
            let window = i64::try_from(window_ms.max(1)).unwrap_or(i64::MAX);
            self.at_ms.max(0) / window
        })
    }

    /// The event id (`webhook-id`): `op_` and 32 hex digits of SHA-256 over the type, the
    /// endpoint and the occurrence, so replicas that notice the same thing in the same
    /// window send the same id.
    pub fn id(&self, window_ms: u64) -> String {
        let mut hash = Sha256::new();
        hash.update(self.kind.as_str().as_bytes());
        hash.update([0]);
        hash.update(self.subject.as_bytes());
        hash.update([0]);
        hash.update(self.occurrence(window_ms).to_be_bytes());
        let digest = hash.finalize();
        let mut id = String::with_capacity(3 + 32);
        id.push_str("op_");
        for byte in &digest[..16] {
            id.push_str(&format!("{byte:02x}"));
        }
        id
    }

    /// The request body.
    pub fn body(&self) -> Vec<u8> {
        json!({
            "type": self.kind.as_str(),
            "timestamp": rfc3339(self.at_ms),
            "data": self.data,
        })
        .to_string()
        .into_bytes()
    }
}

/// `ms` as RFC 3339 in UTC, with milliseconds.
fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .to_string()
}

/// `text` with every `http://` and `https://` URL replaced by `<url>`.
fn without_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let lower = rest.to_ascii_lowercase();
        let start = match (lower.find("http://"), lower.find("https://")) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => break,
        };
        out.push_str(&rest[..start]);
        out.push_str("<url>");
        let tail = &rest[start..];
        let len = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`' | ')'))
            .unwrap_or(tail.len());
        rest = &tail[len..];
    }
    out.push_str(rest);
    out
}

fn cut(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: u64 = 60_000;

    #[test]
    fn types_round_trip_their_names() {
        for kind in NoticeType::ALL {
            assert_eq!(NoticeType::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(NoticeType::parse("delivery.parkd"), None);
    }

    #[test]
    fn the_same_thing_in_the_same_window_has_the_same_id_on_every_replica() {
        let at = 1_796_119_200_000;
        let one = Notice::circuit_opened("ep-1", 9, 10, at);
        let same_window = Notice::circuit_opened("ep-1", 12, 15, at + 59_999);
        let next_window = Notice::circuit_opened("ep-1", 9, 10, at + MINUTE as i64);
        let other_endpoint = Notice::circuit_opened("ep-2", 9, 10, at);
        let other_type = Notice::circuit_closed("ep-1", Some(at), at);
        assert_eq!(one.id(MINUTE), same_window.id(MINUTE));
        assert_ne!(one.id(MINUTE), next_window.id(MINUTE));
        assert_ne!(one.id(MINUTE), other_endpoint.id(MINUTE));
        assert_ne!(one.id(MINUTE), other_type.id(MINUTE));
        let id = one.id(MINUTE);
        assert_eq!(id.len(), 35);
        assert!(id.starts_with("op_"), "{id}");
        assert!(
            id.bytes().all(|b| b.is_ascii_graphic() && b != b'.'),
            "a valid event id: {id}"
        );
    }

    #[test]
    fn an_enable_is_one_occurrence_per_disable_whenever_a_replica_sees_it() {
        let disabled_at = 1_796_119_200_000;
        let seen_here = Notice::enabled("ep", Some("gone: HTTP 410"), Some(disabled_at), 5);
        let seen_there = Notice::enabled("ep", Some("gone: HTTP 410"), Some(disabled_at), 99_999);
        assert_eq!(seen_here.id(MINUTE), seen_there.id(MINUTE));
        let later = Notice::enabled("ep", None, Some(disabled_at + 1), 5);
        assert_ne!(seen_here.id(MINUTE), later.id(MINUTE));
    }

    #[test]
    fn a_parked_notice_has_the_standard_webhooks_shape_and_no_url() {
        let parked = Parked {
            event_id: "evt-1",
            endpoint_id: "ep-1",
            tenant_id: Some("acme"),
            reason: "non_retryable_status",
            dlq_topic: "webhook-events.dlq",
            partition: 1,
            offset: 42,
            attempts: 1,
            last_status: Some(400),
            last_error: "HTTP 400 from https://user:pw@hooks.example.com/in?token=s3cret: bad",
        };
        let notice = Notice::parked(&parked, 1_796_119_200_123);
        let body: Value = serde_json::from_slice(&notice.body()).expect("JSON");
        assert_eq!(body["type"], "delivery.parked");
        assert_eq!(body["timestamp"], "2026-12-01T10:00:00.123Z");
        let data = &body["data"];
        assert_eq!(data["event_id"], "evt-1");
        assert_eq!(data["reason"], "non_retryable_status");
        assert_eq!(data["offset"], 42);
        assert_eq!(data["last_status"], 400);
        assert_eq!(data["last_error"], "HTTP 400 from <url> bad");
        let text = String::from_utf8(notice.body()).expect("UTF-8");
        assert!(
            !text.contains("example.com") && !text.contains("s3cret"),
            "{text}"
        );
    }

    #[test]
    fn urls_are_taken_out_of_any_text() {
        assert_eq!(without_urls("no url"), "no url");
        assert_eq!(
            without_urls("a (HTTP://X.example/p) b http://y"),
            "a (<url>) b <url>"
        );
        let mut long = "é".repeat(400);
        cut(&mut long, 511);
        assert_eq!(long.len(), 510);
    }
}
