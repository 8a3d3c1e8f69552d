//! Building the outbound HTTP request of one attempt: body, Standard Webhooks headers and
//! signature, the event's own headers and the endpoint's. Pure: no I/O.

use hookline_core::WebhookEvent;
use hookline_core::endpoint::ReceiverAuth;
use hookline_core::secret::Secret;
use hookline_core::signing::{SigningSecret, sign};

/// One HTTP POST, ready to send.
#[derive(Clone, Debug, PartialEq)]
pub struct OutboundRequest {
    /// Where to.
    pub url: String,
    /// Header names and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body: the event's payload bytes, unchanged.
    pub body: Vec<u8>,
    /// The `Authorization` value from the endpoint's credential, kept apart from the
    /// headers so that it never shows in their `Debug`.
    pub authorization: Option<Secret>,
}

/// The inputs of a request besides the event.
#[derive(Clone, Copy, Debug)]
pub struct RequestParts<'a> {
    /// The URL, chosen once when the event was validated.
    pub url: &'a str,
    /// Signing secrets; several while one rotates, none for an unsigned endpoint.
    pub secrets: &'a [SigningSecret],
    /// Headers the endpoint's configuration adds to every request.
    pub endpoint_headers: &'a [(String, String)],
    /// The `webhook-timestamp`, in seconds since the epoch.
    pub timestamp_s: i64,
    /// The W3C trace context to pass on.
    pub traceparent: Option<&'a str>,
    /// The attempt number, starting at 1.
    pub attempt: u32,
    /// The endpoint's credential for its receiver, sent as `Authorization`. `None` for an
    /// attempt to an override URL: see `delivery::attempt::endpoint_extras`.
    pub credential: Option<&'a ReceiverAuth>,
}

/// Builds the request for `event`.
pub fn build_request(event: &WebhookEvent, parts: RequestParts<'_>) -> OutboundRequest {
    let url = parts.url.to_owned();
    let mut headers: Vec<(String, String)> = Vec::with_capacity(8 + event.headers.len());
    for (name, value) in parts.endpoint_headers {
        headers.push((name.clone(), value.clone()));
    }
    for (name, value) in &event.headers {
        headers.push((name.clone(), value.clone()));
    }
    headers.push(("content-type".to_owned(), event.content_type.clone()));
    headers.push(("webhook-id".to_owned(), event.event_id.clone()));
    headers.push((
        "webhook-timestamp".to_owned(),
        parts.timestamp_s.to_string(),
    ));
    if !parts.secrets.is_empty() {
        let signature = sign(
            parts.secrets,
            &event.event_id,
            parts.timestamp_s,
            &event.payload,
        );
        headers.push(("webhook-signature".to_owned(), signature));
    }
    headers.push(("webhook-attempt".to_owned(), parts.attempt.to_string()));
    if let Some(traceparent) = parts.traceparent {
        headers.push(("traceparent".to_owned(), traceparent.to_owned()));
    }
    OutboundRequest {
        url,
        headers,
        body: event.payload.clone(),
        authorization: parts.credential.map(ReceiverAuth::header_value),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn event() -> WebhookEvent {
        WebhookEvent {
            event_id: "msg_p5jXN8AQM9LWM0D4loKWxJek".to_owned(),
            event_type: "invoice.paid".to_owned(),
            endpoint_id: Some("ep-1".to_owned()),
            tenant_id: None,
            channels: Vec::new(),
            endpoint_url: None,
            payload: br#"{"test": 2432232314}"#.to_vec(),
            content_type: "application/json".to_owned(),
            headers: BTreeMap::from([("x-tenant".to_owned(), "acme".to_owned())]),
            created_at_ms: 0,
        }
    }

    fn header<'a>(request: &'a OutboundRequest, name: &str) -> Option<&'a str> {
        request
            .headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn signs_with_the_standard_webhooks_scheme() {
        let secret: SigningSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
            .parse()
            .expect("valid secret");
        let request = build_request(
            &event(),
            RequestParts {
                url: "https://example.com/hook",
                secrets: &[secret],
                endpoint_headers: &[],
                timestamp_s: 1_614_265_330,
                traceparent: None,
                attempt: 1,
                credential: None,
            },
        );
        assert_eq!(
            header(&request, "webhook-signature"),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
        assert_eq!(
            header(&request, "webhook-id"),
            Some("msg_p5jXN8AQM9LWM0D4loKWxJek")
        );
        assert_eq!(header(&request, "webhook-timestamp"), Some("1614265330"));
        assert_eq!(header(&request, "x-tenant"), Some("acme"));
        assert_eq!(request.body, event().payload);
        assert_eq!(request.url, "https://example.com/hook");
    }

    #[test]
    fn an_unsigned_endpoint_gets_no_signature() {
        let request = build_request(
            &event(),
            RequestParts {
                url: "https://override.example/hook",
                secrets: &[],
                endpoint_headers: &[],
                timestamp_s: 1,
                traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
                attempt: 3,
                credential: None,
            },
        );
        assert_eq!(header(&request, "webhook-signature"), None);
        assert_eq!(request.url, "https://override.example/hook");
        assert_eq!(header(&request, "webhook-attempt"), Some("3"));
        assert!(header(&request, "traceparent").is_some());
        assert_eq!(request.authorization, None);
    }

    #[test]
    fn a_credential_becomes_authorization_apart_from_the_headers() {
        let credential = ReceiverAuth::Bearer {
            token: Secret::new("tok_s3cret_value_1234"),
        };
        let request = build_request(
            &event(),
            RequestParts {
                url: "https://example.com/hook",
                secrets: &[],
                endpoint_headers: &[("x-env".to_owned(), "prod".to_owned())],
                timestamp_s: 1,
                traceparent: None,
                attempt: 1,
                credential: Some(&credential),
            },
        );
        assert_eq!(
            request.authorization.as_ref().map(Secret::expose),
            Some("Bearer tok_s3cret_value_1234")
        );
        assert_eq!(header(&request, "authorization"), None);
        assert_eq!(header(&request, "x-env"), Some("prod"));
        assert!(!format!("{request:?}").contains("s3cret"));
    }
}
