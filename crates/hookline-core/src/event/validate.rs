//! Checks an event before delivery: ids, sizes and headers.

use super::{EventError, WebhookEvent};
use crate::http_field::{is_field_value, is_reserved, is_token};
use crate::subscription::check_channel;

/// Longest `event_id`, `endpoint_id` and `tenant_id`, in bytes.
pub const MAX_ID_LEN: usize = 256;
pub use crate::subscription::{MAX_CHANNEL_LEN, MAX_CHANNELS};
/// Longest `event_type`, in bytes.
pub const MAX_EVENT_TYPE_LEN: usize = 256;
/// Longest `endpoint_url`, in bytes.
pub const MAX_URL_LEN: usize = 2048;
/// Most extra headers an event may carry.
pub const MAX_HEADERS: usize = 64;
/// Longest extra header value, in bytes.
pub const MAX_HEADER_VALUE_LEN: usize = 8192;

impl WebhookEvent {
    /// Checks the event: ids non-empty and within [`MAX_ID_LEN`] (`event_id` visible ASCII
    /// without `.`, as it becomes the `webhook-id` header and starts the signed content
    /// `{id}.{timestamp}.{payload}`; the Standard Webhooks specification asks that a
    /// publisher-chosen id never hold a `.`, so that no id and timestamp pair can pass for
    /// another's), no control characters in `event_type` and
    /// the ids, at least one of `endpoint_id` and `tenant_id`, at most [`MAX_CHANNELS`]
    /// channels of visible ASCII, the payload at most `max_payload_bytes`, a valid `content_type`, and
    /// at most [`MAX_HEADERS`] headers whose names are HTTP tokens, distinct ignoring case
    /// and not in [`RESERVED_HEADERS`](super::RESERVED_HEADERS). The URL itself is checked by
    /// [`check_url`](crate::url_guard::check_url).
    pub fn validate(&self, max_payload_bytes: usize) -> Result<(), EventError> {
        check_text("event_id", &self.event_id, MAX_ID_LEN)?;
        if !self
            .event_id
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'.')
        {
            return Err(EventError::InvalidChars {
                field: "event_id",
                rule: "must be visible ASCII without spaces or `.`",
            });
        }
        check_text("event_type", &self.event_type, MAX_EVENT_TYPE_LEN)?;
        if let Some(endpoint_id) = &self.endpoint_id {
            check_text("endpoint_id", endpoint_id, MAX_ID_LEN)?;
        }
        if let Some(tenant_id) = &self.tenant_id {
            check_text("tenant_id", tenant_id, MAX_ID_LEN)?;
        }
        if self.endpoint_id.is_none() && self.tenant_id.is_none() {
            return Err(EventError::NoRecipient);
        }
        self.check_channels()?;
        if let Some(url) = &self.endpoint_url {
            check_text("endpoint_url", url, MAX_URL_LEN)?;
        }
        if self.payload.len() > max_payload_bytes {
            return Err(EventError::PayloadTooLarge {
                size: self.payload.len(),
                max: max_payload_bytes,
            });
        }
        if self.content_type.is_empty() {
            return Err(EventError::Empty {
                field: "content_type",
            });
        }
        if !is_field_value(&self.content_type) {
            return Err(EventError::InvalidChars {
                field: "content_type",
                rule: "must be tab, space or visible ASCII",
            });
        }
        self.check_headers()
    }

    fn check_channels(&self) -> Result<(), EventError> {
        if self.channels.len() > MAX_CHANNELS {
            return Err(EventError::TooManyChannels {
                count: self.channels.len(),
                max: MAX_CHANNELS,
            });
        }
        for channel in &self.channels {
            check_text("channels", channel, MAX_CHANNEL_LEN)?;
            if check_channel(channel).is_err() {
                return Err(EventError::InvalidChars {
                    field: "channels",
                    rule: "must be visible ASCII without spaces or `*`",
                });
            }
        }
        Ok(())
    }

    fn check_headers(&self) -> Result<(), EventError> {
        if self.headers.len() > MAX_HEADERS {
            return Err(EventError::TooManyHeaders {
                count: self.headers.len(),
                max: MAX_HEADERS,
            });
        }
        for (at, (name, value)) in self.headers.iter().enumerate() {
            if !is_token(name) {
                return Err(EventError::InvalidHeaderName { name: name.clone() });
            }
            if is_reserved(name) {
                return Err(EventError::ReservedHeader { name: name.clone() });
            }
            // Compared with the names before it, ignoring case: at most 64 names, so at
            // most 2,016 comparisons, and no lowercased copy of each name per event.
            if self
                .headers
                .keys()
                .take(at)
                .any(|before| before.eq_ignore_ascii_case(name))
            {
                return Err(EventError::DuplicateHeader { name: name.clone() });
            }
            if value.len() > MAX_HEADER_VALUE_LEN || !is_field_value(value) {
                return Err(EventError::InvalidHeaderValue { name: name.clone() });
            }
        }
        Ok(())
    }
}

fn check_text(field: &'static str, value: &str, max: usize) -> Result<(), EventError> {
    if value.is_empty() {
        return Err(EventError::Empty { field });
    }
    if value.len() > max {
        return Err(EventError::TooLong {
            field,
            len: value.len(),
            max,
        });
    }
    if value.chars().any(char::is_control) {
        return Err(EventError::InvalidChars {
            field,
            rule: "must not contain control characters",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::ErrorReason;
    use crate::event::tests::sample;

    const MAX: usize = 1024;

    fn err_of(f: impl FnOnce(&mut WebhookEvent)) -> EventError {
        let mut e = sample();
        f(&mut e);
        e.validate(MAX).expect_err("should be invalid")
    }

    #[test]
    fn sample_is_valid() {
        sample().validate(MAX).expect("valid");
    }

    #[test]
    fn ids() {
        assert!(matches!(
            err_of(|e| e.event_id.clear()),
            EventError::Empty { field: "event_id" }
        ));
        assert!(matches!(
            err_of(|e| e.event_id = "a b".into()),
            EventError::InvalidChars {
                field: "event_id",
                ..
            }
        ));
        assert!(matches!(
            err_of(|e| e.endpoint_id = Some("x".repeat(MAX_ID_LEN + 1))),
            EventError::TooLong {
                field: "endpoint_id",
                ..
            }
        ));
        assert!(matches!(
            err_of(|e| e.event_type = "a\nb".into()),
            EventError::InvalidChars {
                field: "event_type",
                ..
            }
        ));
        assert!(matches!(
            err_of(|e| e.endpoint_url = Some(String::new())),
            EventError::Empty {
                field: "endpoint_url"
            }
        ));
        let mut e = sample();
        e.event_id = "x".repeat(MAX_ID_LEN);
        e.validate(MAX).expect("limit is inclusive");
    }

    #[test]
    fn an_event_id_with_a_full_stop_is_refused() {
        // `{id}.{timestamp}.{payload}` is what is signed: a `.` in the id would let an id
        // and a timestamp be read as another pair.
        for id in ["evt.1", "a.1614265330", ".", "evt-1."] {
            let err = err_of(|e| e.event_id = id.into());
            assert!(
                matches!(
                    err,
                    EventError::InvalidChars {
                        field: "event_id",
                        ..
                    }
                ),
                "{id}: {err:?}"
            );
            assert_eq!(err.reason(), ErrorReason::MalformedEvent);
        }
        let mut e = sample();
        e.event_id = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W-1_x:y".into();
        e.validate(MAX).expect("other visible ASCII stays allowed");
    }

    #[test]
    fn recipients_and_channels() {
        assert!(matches!(
            err_of(|e| {
                e.endpoint_id = None;
                e.tenant_id = None;
            }),
            EventError::NoRecipient
        ));
        let mut tenant_event = sample();
        tenant_event.endpoint_id = None;
        tenant_event.validate(MAX).expect("a tenant event");
        let mut direct = sample();
        direct.tenant_id = None;
        direct.validate(MAX).expect("a direct delivery");
        assert!(matches!(
            err_of(|e| e.tenant_id = Some(String::new())),
            EventError::Empty { field: "tenant_id" }
        ));
        assert!(matches!(
            err_of(|e| e.channels = vec!["a b".into()]),
            EventError::InvalidChars {
                field: "channels",
                ..
            }
        ));
        assert!(matches!(
            err_of(|e| e.channels = vec!["eu.*".into()]),
            EventError::InvalidChars {
                field: "channels",
                ..
            }
        ));
        assert!(matches!(
            err_of(|e| e.channels = vec!["c".into(); MAX_CHANNELS + 1]),
            EventError::TooManyChannels { .. }
        ));
    }

    #[test]
    fn payload_size() {
        let err = err_of(|e| e.payload = vec![b'a'; MAX + 1]);
        assert!(matches!(
            err,
            EventError::PayloadTooLarge {
                size: 1025,
                max: MAX
            }
        ));
        assert_eq!(err.reason(), ErrorReason::PayloadTooLarge);
        let mut e = sample();
        e.payload = vec![b'a'; MAX];
        e.validate(MAX).expect("limit is inclusive");
    }

    #[test]
    fn headers() {
        let add = |name: &str, value: &str| {
            let (name, value) = (name.to_owned(), value.to_owned());
            err_of(move |e| {
                e.headers.insert(name, value);
            })
        };
        assert!(matches!(
            add("Bad Name", "v"),
            EventError::InvalidHeaderName { .. }
        ));
        for reserved in [
            "Webhook-Signature",
            "webhook-id",
            "Content-Length",
            "HOST",
            "webhook-attempt",
            "traceparent",
            "tracestate",
        ] {
            assert!(
                matches!(add(reserved, "v"), EventError::ReservedHeader { .. }),
                "{reserved}"
            );
        }
        assert!(matches!(
            add("x-tenant", "v"),
            EventError::DuplicateHeader { .. }
        ));
        let far_apart = err_of(|e| {
            for name in ["A-One", "M-Two", "Z-Three", "a-one"] {
                e.headers.insert(name.into(), "v".into());
            }
        });
        assert!(
            matches!(&far_apart, EventError::DuplicateHeader { name } if name == "a-one"),
            "{far_apart:?}"
        );
        let mut distinct = sample();
        distinct.headers = (0..MAX_HEADERS)
            .map(|i| (format!("X-H{i}"), "v".into()))
            .collect();
        distinct.validate(MAX).expect("64 distinct names");
        assert!(matches!(
            add("X-Evil", "a\r\nb: c"),
            EventError::InvalidHeaderValue { .. }
        ));
        assert!(matches!(
            err_of(|e| e.content_type = "a\nb".into()),
            EventError::InvalidChars {
                field: "content_type",
                ..
            }
        ));
        let err = err_of(|e| {
            for i in 0..=MAX_HEADERS {
                e.headers.insert(format!("x-h{i}"), "v".into());
            }
        });
        assert!(matches!(err, EventError::TooManyHeaders { .. }));
        assert_eq!(err.reason(), ErrorReason::MalformedEvent);
    }
}
