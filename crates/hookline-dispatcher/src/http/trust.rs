//! Which servers the delivery client trusts. The shared client (the system's roots, on the
//! process's one TLS connector) refuses a certificate from a CA the system does not know;
//! a client given that CA (`http.ca_file`) delivers to the same server.

use std::time::Duration;

use hookline_core::classify::AttemptOutcome;
use hookline_testkit::{TestPki, TlsReceiver};

use super::leaks::{loopback, request, sender_with};
use super::{HttpSender, Roots};

fn sender(roots: Vec<native_tls::Certificate>) -> HttpSender {
    sender_with(loopback(), Roots(roots), 1024)
}

#[tokio::test]
async fn the_shared_client_refuses_an_unknown_ca_and_a_client_given_it_delivers() {
    let pki = TestPki::new("hookline trust test CA");
    let receiver = TlsReceiver::start(&pki, false).await;

    let shared = sender(Vec::new());
    let attempt = shared
        .send(
            None,
            request(receiver.url("system")),
            Duration::from_secs(5),
        )
        .await;
    assert!(
        matches!(attempt.outcome, AttemptOutcome::Connect),
        "{:?}: {}",
        attempt.outcome,
        attempt.detail
    );
    assert!(receiver.received().is_empty(), "a request got through");

    let ca = native_tls::Certificate::from_pem(pki.ca_pem().as_bytes()).expect("the CA");
    let trusting = sender(vec![ca]);
    let attempt = trusting
        .send(None, request(receiver.url("given")), Duration::from_secs(5))
        .await;
    assert_eq!(attempt.status(), Some(200), "{}", attempt.detail);
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/hooks/given");
}
