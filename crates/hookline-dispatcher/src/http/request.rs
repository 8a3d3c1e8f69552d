//! Building the outbound HTTP request of one attempt: body, Standard Webhooks headers and
//! signature, the event's own headers and the endpoint's. Pure: no I/O.

use std::fmt;

use hookline_core::WebhookEvent;
use hookline_core::endpoint::ReceiverAuth;
use hookline_core::secret::Secret;
use hookline_core::signing::{self, Signer};
use hookline_core::url_guard::redact_url;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

// The Standard Webhooks headers, as names parsed once.
const WEBHOOK_ID: HeaderName = HeaderName::from_static(signing::WEBHOOK_ID);
const WEBHOOK_TIMESTAMP: HeaderName = HeaderName::from_static(signing::WEBHOOK_TIMESTAMP);
const WEBHOOK_SIGNATURE: HeaderName = HeaderName::from_static(signing::WEBHOOK_SIGNATURE);
const WEBHOOK_ATTEMPT: HeaderName = HeaderName::from_static("webhook-attempt");
const TRACEPARENT: HeaderName = HeaderName::from_static(hookline_core::headers::TRACEPARENT);

/// One HTTP POST, ready to send. Its `Debug` shows header names, not their values (they
/// hold credentials and signatures), and no query string.
#[derive(Clone, PartialEq)]
pub struct OutboundRequest {
    /// Where to.
    pub url: reqwest::Url,
    /// Whether `url` is the event's override: nothing of the endpoint's own credentials
    /// may be sent with it.
    pub url_overridden: bool,
    /// The headers, in order (names lower-case, as HTTP/1 sends them).
    pub headers: HeaderMap,
    /// The body: the event's payload bytes, unchanged.
    pub body: Vec<u8>,
    /// The `Authorization` value from the endpoint's credential, kept apart from the
    /// headers so that it never shows in their `Debug`.
    pub authorization: Option<Secret>,
}

impl fmt::Debug for OutboundRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.keys().map(HeaderName::as_str).collect();
        f.debug_struct("OutboundRequest")
            .field("url", &redact_url(self.url.as_str()))
            .field("url_overridden", &self.url_overridden)
            .field("headers", &names)
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// The inputs of a request besides the event.
#[derive(Clone, Copy)]
pub struct RequestParts<'a> {
    /// The URL, chosen and parsed once when the event was validated.
    pub url: &'a reqwest::Url,
    /// Whether `url` is the event's override of the endpoint's URL: the request is then
    /// signed but carries none of `endpoint_headers`.
    pub url_overridden: bool,
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
    /// The endpoint's credential for its receiver, sent as `Authorization`. `None` for an
    /// attempt to an override URL: see `delivery::attempt::endpoint_extras`.
    pub credential: Option<&'a ReceiverAuth>,
}

/// Builds the request for `event`. A header whose name or value HTTP cannot carry is left
/// out rather than failing the delivery (both were validated when the event and the endpoint
/// were read).
pub fn build_request(event: &WebhookEvent, parts: RequestParts<'_>) -> OutboundRequest {
    let url = parts.url.clone();
    // The endpoint's headers are its credentials for its own URL, not for one an event chose.
    let endpoint_headers = if parts.url_overridden {
        &[][..]
    } else {
        parts.endpoint_headers
    };
    let mut headers = HeaderMap::with_capacity(8 + endpoint_headers.len() + event.headers.len());
    // The endpoint's pairs as references, like the event's map's.
    let custom = endpoint_headers
        .iter()
        .map(|(name, value)| (name, value))
        .chain(&event.headers);
    for (name, value) in custom {
        if let Ok(name) = HeaderName::try_from(name.as_str()) {
            append(&mut headers, name, value.clone());
        }
    }
    append(&mut headers, CONTENT_TYPE, event.content_type.clone());
    append(&mut headers, WEBHOOK_ID, event.event_id.clone());
    append(
        &mut headers,
        WEBHOOK_TIMESTAMP,
        parts.timestamp_s.to_string(),
    );
    if !parts.signer.is_empty() {
        let signature = parts
            .signer
            .sign(&event.event_id, parts.timestamp_s, &event.payload);
        append(&mut headers, WEBHOOK_SIGNATURE, signature);
    }
    append(&mut headers, WEBHOOK_ATTEMPT, parts.attempt.to_string());
    if let Some(traceparent) = parts.traceparent {
        append(&mut headers, TRACEPARENT, traceparent.to_owned());
    }
    OutboundRequest {
        url,
        url_overridden: parts.url_overridden,
        headers,
        body: event.payload.clone(),
        // Nor is its credential (`endpoint_extras` gives none for an override either).
        authorization: parts
            .credential
            .filter(|_| !parts.url_overridden)
            .map(ReceiverAuth::header_value),
    }
}

/// Appends `name: value`, unless HTTP cannot carry the value.
fn append(headers: &mut HeaderMap, name: HeaderName, value: String) {
    if let Ok(value) = HeaderValue::try_from(value) {
        headers.append(name, value);
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
            expires_at_ms: None,
        }
    }

    fn parse(url: &str) -> reqwest::Url {
        reqwest::Url::parse(url).expect("a URL")
    }

    fn header<'a>(request: &'a OutboundRequest, name: &str) -> Option<&'a str> {
        request
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
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
                url: &parse("https://example.com/hook"),
                url_overridden: false,
                signer: &signer,
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
        assert_eq!(request.url.as_str(), "https://example.com/hook");
    }

    #[test]
    fn an_unsigned_endpoint_gets_no_signature() {
        let request = build_request(
            &event(),
            RequestParts {
                url: &parse("https://override.example/hook"),
                url_overridden: true,
                signer: &Signer::default(),
                endpoint_headers: &[],
                timestamp_s: 1,
                traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
                attempt: 3,
                credential: None,
            },
        );
        assert_eq!(header(&request, "webhook-signature"), None);
        assert_eq!(request.url.as_str(), "https://override.example/hook");
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
                url: &parse("https://example.com/hook"),
                url_overridden: false,
                signer: &Signer::default(),
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
                url: &parse("https://example.com/hook"),
                signer: &signer,
                url_overridden: false,
                endpoint_headers: &[],
                timestamp_s: 1_614_265_330,
                traceparent: None,
                attempt: 1,
                credential: None,
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
                url_overridden: false,
                url: &parse("https://example.com/hook"),
                endpoint_headers: &[],
                timestamp_s: 1_614_265_330,
                traceparent: None,
                attempt: 1,
                credential: None,
            },
        );
        assert!(
            header_of(&request).starts_with("v1a,") && !header_of(&request).contains(' '),
            "an endpoint with keys only is signed"
        );
    }

    #[test]
    fn every_header_keeps_its_value_and_its_place_and_one_http_cannot_carry_is_left_out() {
        let mut event = event();
        event.headers = BTreeMap::from([
            ("x-broken".to_owned(), "line\nbreak".to_owned()),
            ("x-tenant".to_owned(), "acme".to_owned()),
        ]);
        let endpoint_headers = [
            ("x-api-key".to_owned(), "key_1".to_owned()),
            ("x-empty".to_owned(), String::new()),
        ];
        let request = build_request(
            &event,
            RequestParts {
                url: &parse("https://example.com/hook"),
                url_overridden: false,
                signer: &Signer::new(Vec::new(), Vec::new()),
                endpoint_headers: &endpoint_headers,
                timestamp_s: -12,
                traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
                attempt: 4_294_967_295,
                credential: None,
            },
        );
        let headers: Vec<(&str, &str)> = request
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.to_str().unwrap_or("(not text)")))
            .collect();
        assert_eq!(
            headers,
            [
                ("x-api-key", "key_1"),
                ("x-empty", ""),
                ("x-tenant", "acme"),
                ("content-type", "application/json"),
                ("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"),
                ("webhook-timestamp", "-12"),
                ("webhook-attempt", "4294967295"),
                (
                    "traceparent",
                    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
                ),
            ]
        );
    }

    fn header_of(request: &OutboundRequest) -> &str {
        header(request, "webhook-signature").unwrap_or_default()
    }

    #[test]
    fn an_overridden_url_is_signed_but_gets_none_of_the_endpoints_headers() {
        let secret: SigningSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
            .parse()
            .expect("valid secret");
        let signer = Signer::new(vec![secret], Vec::new());
        let endpoint_headers = [("X-Api-Key".to_owned(), "key_SECRET".to_owned())];
        let credential = ReceiverAuth::Bearer {
            token: Secret::new("tok_SECRET"),
        };
        let url = parse("https://example.com/hook?token=q_SECRET");
        let parts = |url_overridden| RequestParts {
            url: &url,
            url_overridden,
            signer: &signer,
            endpoint_headers: &endpoint_headers,
            timestamp_s: 1_614_265_330,
            traceparent: None,
            attempt: 1,
            credential: Some(&credential),
        };
        let own = build_request(&event(), parts(false));
        assert_eq!(header(&own, "X-Api-Key"), Some("key_SECRET"));
        assert!(own.authorization.is_some());
        let overridden = build_request(&event(), parts(true));
        assert_eq!(header(&overridden, "X-Api-Key"), None);
        assert!(
            overridden.authorization.is_none(),
            "the endpoint's credential never goes to an override"
        );
        assert!(overridden.url_overridden);
        assert_eq!(
            header(&overridden, "webhook-signature"),
            header(&own, "webhook-signature"),
            "still signed"
        );
        assert_eq!(
            header(&overridden, "x-tenant"),
            Some("acme"),
            "the event's own"
        );
        let debug = format!("{own:?}");
        assert!(!debug.contains("SECRET"), "{debug}");
        assert!(debug.contains("x-api-key"), "{debug}");
    }
}
