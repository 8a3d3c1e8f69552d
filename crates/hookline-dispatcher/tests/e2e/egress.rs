//! Outbound policy and credentials end to end: a port outside `allowed_ports` and an
//! address in `deny_cidrs` are refused (`blocked_url`, no connection made); an endpoint
//! with a client certificate and a bearer token is delivered over mTLS, one without the
//! certificate fails its handshakes into the DLQ, and neither the key nor the token shows
//! in a DLQ record or goes to an override URL.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use hookline_core::envelope::ErrorReason;
use hookline_testkit::{Reply, TestPki, TlsReceiver, unique_name, wait_until};
use rdkafka::message::{Headers, Message};

use crate::harness::{DEADLINE, Harness, event};

/// A loopback listener that counts the connections it accepts (and drops them).
async fn counting_listener(ip: &str) -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind((ip, 0))
        .await
        .expect("bind a loopback address");
    let port = listener.local_addr().expect("bound").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    tokio::spawn(async move {
        while listener.accept().await.is_ok() {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, accepted)
}

fn port_of(url: &str) -> u16 {
    url::Url::parse(url)
        .expect("url")
        .port()
        .expect("an explicit port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_port_not_allowed_or_a_denied_address_is_blocked_without_a_connection() {
    let mut h = Harness::new("egress-policy").await;
    let ok = h.receiver.script("ok", |_| Reply::Status(200));
    // Both would answer: the refusal is the policy's, not the network's.
    let (other_port, other_accepts) = counting_listener("127.0.0.1").await;
    let (denied_port, denied_accepts) = counting_listener("127.0.0.2").await;
    h.put_endpoint("ep-ok", serde_json::json!({ "url": ok }))
        .await;
    h.put_endpoint(
        "ep-port",
        serde_json::json!({ "url": format!("http://127.0.0.1:{other_port}/hook") }),
    )
    .await;
    h.put_endpoint(
        "ep-denied",
        serde_json::json!({ "url": format!("http://127.0.0.2:{denied_port}/hook") }),
    )
    .await;
    let mut config = h.config();
    config.outbound.allowed_ports = vec![port_of(&ok), denied_port];
    config.outbound.deny_cidrs = vec!["127.0.0.2/32".to_owned()];
    h.start(config).await;

    h.publish_json(&event("ep-port", 1)).await;
    h.publish_json(&event("ep-denied", 2)).await;
    h.publish_json(&event("ep-ok", 3)).await;

    let dlq = h.dlq(2).await;
    for (envelope, _) in &dlq {
        assert_eq!(
            envelope.error_reason,
            ErrorReason::BlockedUrl,
            "{envelope:?}"
        );
        assert_eq!(envelope.attempts, 0, "refused before any attempt");
    }
    let message = |endpoint: &str| {
        dlq.iter()
            .find(|(e, _)| e.endpoint_id.as_deref() == Some(endpoint))
            .map(|(e, _)| e.error_message.clone())
            .unwrap_or_else(|| panic!("a DLQ record for {endpoint}"))
    };
    assert!(
        message("ep-port").contains(&format!("port {other_port}")),
        "{}",
        message("ep-port")
    );
    assert!(
        message("ep-denied").contains("denied"),
        "{}",
        message("ep-denied")
    );
    h.wait_for_requests("ok", 1).await;
    assert_eq!(
        other_accepts.load(Ordering::SeqCst),
        0,
        "no connection to the port"
    );
    assert_eq!(
        denied_accepts.load(Ordering::SeqCst),
        0,
        "no connection to the address"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mtls_and_a_bearer_token_reach_the_receiver_and_never_a_dlq_record_or_an_override() {
    let mut h = Harness::new("egress-mtls").await;
    let pki = TestPki::new("hookline e2e CA");
    let client = pki.client("dispatcher-e2e");
    let tls = TlsReceiver::start(&pki, true).await;
    let token = format!("tok_{}", unique_name("bearer"));
    let key_body = client
        .key_pem
        .lines()
        .nth(1)
        .expect("key base64")
        .to_owned();
    let dir = tempfile::tempdir().expect("temp dir");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, pki.ca_pem()).expect("write the CA");
    let plain = h.receiver.script("override", |_| Reply::Status(200));

    h.put_endpoint(
        "ep-mtls",
        serde_json::json!({
            "url": tls.url("mtls"),
            "client_certificate": client.certificate_pem,
            "client_key": client.key_pem,
            "server_ca": pki.ca_pem(),
            "auth": { "type": "bearer", "token": token },
            "allow_url_override": true,
        }),
    )
    .await;
    h.put_endpoint(
        "ep-nocert",
        serde_json::json!({
            "url": tls.url("nocert"),
            "auth": { "type": "bearer", "token": token },
        }),
    )
    .await;
    let mut config = h.config();
    config.http.ca_file = Some(ca_file);
    h.start(config).await;

    let delivered = event("ep-mtls", 1);
    h.publish_json(&delivered).await;
    h.publish_json(&event("ep-nocert", 2)).await;
    let mut overridden = event("ep-mtls", 3);
    overridden.endpoint_url = Some(plain.clone());
    h.publish_json(&overridden).await;

    let received = wait_until(DEADLINE, "the mTLS delivery", || async {
        tls.received().into_iter().find(|r| r.path == "/hooks/mtls")
    })
    .await;
    assert_eq!(received.client_subject.as_deref(), Some("dispatcher-e2e"));
    let expected = format!("Bearer {token}");
    assert_eq!(received.header("authorization"), Some(expected.as_str()));
    assert_eq!(
        received.header("webhook-id"),
        Some(delivered.event_id.as_str())
    );
    assert!(received.header("webhook-signature").is_some());

    // The override URL gets the event, but neither the token nor (plain HTTP) a certificate.
    h.wait_for_requests("override", 1).await;
    let to_override = &h.receiver.received("override")[0];
    assert_eq!(to_override.header("authorization"), None);
    assert_eq!(
        to_override.header("webhook-id"),
        Some(overridden.event_id.as_str())
    );

    // Without a client certificate every attempt fails its handshake; then the DLQ.
    let dlq = h.dlq(1).await;
    let (envelope, message) = &dlq[0];
    assert_eq!(envelope.endpoint_id.as_deref(), Some("ep-nocert"));
    assert_eq!(envelope.error_reason, ErrorReason::RetriesExhausted);
    assert_eq!(envelope.attempts, 3);
    assert_eq!(envelope.last_status_code, None);
    assert!(
        tls.refused_handshakes() >= 3,
        "{}",
        tls.refused_handshakes()
    );
    assert!(tls.received().iter().all(|r| r.path != "/hooks/nocert"));
    let mut record = format!("{envelope:?}").into_bytes();
    record.extend_from_slice(message.payload().unwrap_or_default());
    if let Some(headers) = message.headers() {
        for header in headers.iter() {
            record.extend_from_slice(header.key.as_bytes());
            record.extend_from_slice(header.value.unwrap_or_default());
        }
    }
    let record = String::from_utf8_lossy(&record);
    assert!(!record.contains(&token), "the token is in the DLQ record");
    assert!(!record.contains(&key_body), "the key is in the DLQ record");
    h.stop().await;
}
