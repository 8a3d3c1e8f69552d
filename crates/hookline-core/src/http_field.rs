//! Syntax checks for HTTP header names and values (crate-private).

/// Headers the dispatcher sets itself or that belong to the connection; an event or an
/// endpoint config may not set them (compared case-insensitively). `webhook-attempt` and the
/// W3C trace context (`traceparent`, `tracestate`) are the dispatcher's too: it sends its own
/// attempt number and a child of the record's trace, and a second copy from a custom header
/// would contradict them. The trace reaches the dispatcher as the Kafka record's
/// `traceparent` header, never as a custom HTTP header; `tracestate` is not passed on.
pub const RESERVED_HEADERS: &[&str] = &[
    "webhook-id",
    "webhook-signature",
    "webhook-timestamp",
    "webhook-attempt",
    "traceparent",
    "tracestate",
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "expect",
    "proxy-connection",
    "proxy-authorization",
];

/// Whether `name` is an HTTP token (RFC 9110 `tchar`s, non-empty).
pub(crate) fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

/// Whether `value` is a header value every HTTP client accepts: tab and visible ASCII or space.
pub(crate) fn is_field_value(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b == b'\t' || (0x20..=0x7e).contains(&b))
}

/// Whether `name` is one of [`RESERVED_HEADERS`].
pub(crate) fn is_reserved(name: &str) -> bool {
    RESERVED_HEADERS
        .iter()
        .any(|reserved| reserved.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        assert!(is_token("X-Custom_Header.1"));
        assert!(!is_token(""));
        assert!(!is_token("Bad Header"));
        assert!(!is_token("bad:header"));
        assert!(!is_token("naïve"));
    }

    #[test]
    fn field_values() {
        assert!(is_field_value("text/plain; charset=utf-8\tx"));
        assert!(is_field_value(""));
        assert!(!is_field_value("a\r\nInjected: 1"));
        assert!(!is_field_value("é"));
    }

    #[test]
    fn reserved_is_case_insensitive() {
        assert!(is_reserved("Webhook-Signature"));
        assert!(is_reserved("HOST"));
        assert!(!is_reserved("x-webhook-signature"));
    }

    #[test]
    fn the_attempt_and_trace_headers_are_the_dispatchers() {
        for name in [
            "webhook-attempt",
            "Webhook-Attempt",
            "traceparent",
            "TraceState",
        ] {
            assert!(is_reserved(name), "{name}");
        }
        assert!(!is_reserved("x-trace-id"));
    }
}
