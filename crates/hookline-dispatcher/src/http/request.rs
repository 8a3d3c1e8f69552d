//! Building the outbound HTTP request of one attempt: body, Standard Webhooks headers and
//! signature, the event's own headers and the endpoint's. Pure: no I/O.

use hookline_core::WebhookEvent;
use hookline_core::signing::Signer;

/// One HTTP POST, ready to send.
#[derive(Clone, Debug, PartialEq)]
pub struct OutboundRequest {
    /// Where to.
    pub url: String,
    /// Header names and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body: the event's payload bytes, unchanged.
    pub body: Vec<u8>,
}

/// The inputs of a request besides the event.
#[derive(Clone, Copy, Debug)]
pub struct RequestParts<'a> {
    /// The URL, chosen once when the event was validated.
    pub url: &'a str,
    /// Signing secrets and keys; several while one rotates, none for an unsigned endpoint.
    pub signer: &'a Signer,
    /// Headers the endpoint's configuration adds to every request.
    pub endpoint_headers: &'a [(String, String)],
    /// The `webhook-timestamp`, in seconds since the epoch.
    pub timestamp_s: i64,
    /// The W3C trace context to pass on.
    pub traceparent: Option<&'a str>,
    /// The attempt number, starting at 1.
    pub attempt: u32,
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
    if !parts.signer.is_empty() {
        let signature = parts
            .signer
            .sign(&event.event_id, parts.timestamp_s, &event.payload);
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
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use hookline_core::signing::{SigningKey, SigningSecret, verify, verify_v1a};

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
        let signer = Signer::new(vec![secret], Vec::new());
        let request = build_request(
            &event(),
            RequestParts {
                url: "https://example.com/hook",
                signer: &signer,
                endpoint_headers: &[],
                timestamp_s: 1_614_265_330,
                traceparent: None,
                attempt: 1,
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
                signer: &Signer::default(),
                endpoint_headers: &[],
                timestamp_s: 1,
                traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
                attempt: 3,
            },
        );
        assert_eq!(header(&request, "webhook-signature"), None);
        assert_eq!(request.url, "https://override.example/hook");
        assert_eq!(header(&request, "webhook-attempt"), Some("3"));
        assert!(header(&request, "traceparent").is_some());
    }

    #[test]
    fn signs_with_every_secret_and_every_key() {
        let secret: SigningSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
            .parse()
            .expect("valid secret");
        let key: SigningKey = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg=="
            .parse()
            .expect("valid key");
        let signer = Signer::new(vec![secret.clone()], vec![key.clone()]);
        let request = build_request(
            &event(),
            RequestParts {
                url: "https://example.com/hook",
                signer: &signer,
                endpoint_headers: &[],
                timestamp_s: 1_614_265_330,
                traceparent: None,
                attempt: 1,
            },
        );
        // Svix's published v1a signature of this message with this key.
        assert_eq!(
            header(&request, "webhook-signature"),
            Some(
                "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= \
                 v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg=="
            )
        );
        let header = header(&request, "webhook-signature").unwrap_or_default();
        let (id, ts) = ("msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330);
        verify(&[secret], id, ts, &request.body, header).expect("v1 verifies");
        verify_v1a(&[key.public_key()], id, ts, &request.body, header).expect("v1a verifies");
        let keys_only = Signer::new(Vec::new(), vec![key]);
        let request = build_request(
            &event(),
            RequestParts {
                signer: &keys_only,
                url: "https://example.com/hook",
                endpoint_headers: &[],
                timestamp_s: 1_614_265_330,
                traceparent: None,
                attempt: 1,
            },
        );
        assert!(
            header_of(&request).starts_with("v1a,") && !header_of(&request).contains(' '),
            "an endpoint with keys only is signed"
        );
    }

    fn header_of(request: &OutboundRequest) -> &str {
        header(request, "webhook-signature").unwrap_or_default()
    }
}
