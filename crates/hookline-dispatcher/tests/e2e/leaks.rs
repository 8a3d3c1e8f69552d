//! An event's `endpoint_url` cannot take an endpoint's credentials elsewhere: without the
//! endpoint's opt-in it is parked and never sent; with it, the override gets a request
//! without the endpoint's custom headers and without a signature by its secrets (which the
//! override's receiver could replay to the endpoint), signed only with the endpoint's
//! `override_secrets` when it has some; and the address guard still applies.

use hookline_core::envelope::ErrorReason;
use hookline_core::signing::{SigningSecret, verify};
use hookline_testkit::Reply;

use crate::harness::{Harness, SECRET, event};
use crate::pipeline::expected_signature;

const TOKEN: &str = "Bearer tok_live_TOPSECRET";
/// The secret of the overrides of `ep-signed`, not one of its `secrets`.
const OVERRIDE_SECRET: &str = "whsec_b3ZlcnJpZGUtb25seS1zZWNyZXQtMTIzNDU2Nzg=";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn url_overrides_need_the_endpoints_opt_in_and_never_get_its_headers() {
    let mut h = Harness::new("overrides").await;
    let own = h.receiver.script("own", |_| Reply::Status(204));
    let open_own = h.receiver.script("open-own", |_| Reply::Status(204));
    let refused_target = h.receiver.script("refused-target", |_| Reply::Status(204));
    let allowed_target = h.receiver.script("allowed-target", |_| Reply::Status(204));
    let signed_target = h.receiver.script("signed-target", |_| Reply::Status(204));
    h.put_endpoint(
        "ep-closed",
        serde_json::json!({ "url": own, "secrets": [SECRET], "headers": { "Authorization": TOKEN } }),
    )
    .await;
    h.put_endpoint(
        "ep-open",
        serde_json::json!({
            "url": open_own, "secrets": [SECRET], "headers": { "Authorization": TOKEN },
            "allow_url_override": true,
        }),
    )
    .await;
    h.put_endpoint(
        "ep-signed",
        serde_json::json!({
            "url": open_own, "secrets": [SECRET], "allow_url_override": true,
            "override_secrets": [OVERRIDE_SECRET],
        }),
    )
    .await;
    h.start(h.config()).await;

    // The endpoint's own URL gets its header: the header is there to leak.
    let plain = event("ep-closed", 0);
    h.publish_json(&plain).await;
    let mut refused = event("ep-closed", 1);
    refused.endpoint_url = Some(format!("{refused_target}?token=q_TOPSECRET"));
    h.publish_json(&refused).await;
    let mut allowed = event("ep-open", 2);
    allowed.endpoint_url = Some(allowed_target.clone());
    h.publish_json(&allowed).await;
    let mut signed = event("ep-signed", 4);
    signed.endpoint_url = Some(signed_target.clone());
    h.publish_json(&signed).await;
    let mut metadata = event("ep-open", 3);
    metadata.endpoint_url = Some("http://169.254.169.254/latest/meta-data".into());
    h.publish_json(&metadata).await;

    h.wait_for_requests("own", 1).await;
    h.wait_for_requests("allowed-target", 1).await;
    h.wait_for_requests("signed-target", 1).await;
    let parked = h.dlq(2).await;
    assert_eq!(
        parked.len(),
        2,
        "only the refused and the blocked override are parked"
    );

    let got = &h.receiver.received("own")[0];
    assert_eq!(got.header("authorization"), Some(TOKEN));

    let (envelope, _) = parked
        .iter()
        .find(|(e, _)| e.event_id == refused.event_id)
        .expect("the refused override is parked");
    assert_eq!(envelope.error_reason, ErrorReason::BlockedUrl);
    assert!(
        envelope
            .error_message
            .contains("allow_url_override is false"),
        "{}",
        envelope.error_message
    );
    assert_eq!(
        envelope.endpoint_url.as_deref(),
        Some(format!("{refused_target}?redacted").as_str()),
        "the URL it asked for, redacted"
    );
    assert_eq!(envelope.attempts, 0);
    assert_eq!(
        h.receiver.count("refused-target"),
        0,
        "nothing reached the override of an endpoint that did not opt in"
    );

    let got = &h.receiver.received("allowed-target")[0];
    assert_eq!(
        got.header("authorization"),
        None,
        "the endpoint's header stays home"
    );
    assert_eq!(
        got.header("x-tenant"),
        Some("acme"),
        "the event's own header goes"
    );
    assert_eq!(got.header("webhook-id"), Some(allowed.event_id.as_str()));
    assert!(got.header("webhook-timestamp").is_some(), "a timestamp");
    assert_eq!(
        got.header("webhook-signature"),
        None,
        "not signed with the endpoint's secret, which the endpoint's own URL would accept"
    );
    assert_eq!(h.receiver.count("open-own"), 0);

    // With override secrets, the override is signed with them alone: its receiver verifies
    // it, and the endpoint's own URL would not.
    let got = &h.receiver.received("signed-target")[0];
    let timestamp = got.header("webhook-timestamp").expect("a timestamp");
    let signature = got.header("webhook-signature").expect("signed");
    assert_ne!(
        signature,
        expected_signature(&signed.event_id, timestamp, &signed.payload)
    );
    let timestamp: i64 = timestamp.parse().expect("epoch seconds");
    let verifies = |secret: &str| {
        let secret = SigningSecret::parse(secret).expect("a secret");
        verify(
            &[secret],
            &signed.event_id,
            timestamp,
            &signed.payload,
            signature,
        )
        .is_ok()
    };
    assert!(verifies(OVERRIDE_SECRET), "its receiver verifies it");
    assert!(!verifies(SECRET), "the endpoint's own URL would refuse it");

    let (envelope, _) = parked
        .iter()
        .find(|(e, _)| e.event_id == metadata.event_id)
        .expect("the override to a metadata address is parked");
    assert_eq!(envelope.error_reason, ErrorReason::BlockedUrl);
    assert!(
        envelope.error_message.contains("169.254.169.254"),
        "the address guard refused it: {}",
        envelope.error_message
    );
    h.stop().await;
}
