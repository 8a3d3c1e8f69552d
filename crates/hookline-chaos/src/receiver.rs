//! The receivers: one HTTP endpoint per role on its own loopback port, answering as its
//! behaviour says (a status, a reset, a hang), verifying every signature and recording
//! every request in the scenario's shared [`Tally`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::clock::Clock;
use crate::gate::{Cut, Gate};
use crate::http;
use crate::signature::Verifier;

/// What a request is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// This status.
    Status(u16),
    /// The connection is reset (RST), no answer.
    Reset,
    /// No answer until the client gives up and closes.
    Hang,
}

impl Answer {
    /// Whether this answer delivers the event.
    pub fn is_success(self) -> bool {
        matches!(self, Answer::Status(200..=299))
    }
}

/// What a behaviour is asked about.
#[derive(Clone, Copy, Debug)]
pub struct Ask<'a> {
    /// The `webhook-id`.
    pub id: &'a str,
    /// The `webhook-attempt` (1 for the first).
    pub attempt: u32,
}

/// How an endpoint answers while it serves.
pub type Behaviour = Arc<dyn Fn(&Ask<'_>) -> Answer + Send + Sync>;

/// An endpoint that answers `status` to everything.
pub fn always(status: u16) -> Behaviour {
    Arc::new(move |_| Answer::Status(status))
}

/// The endpoint's state, switched by a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Answer as the behaviour says.
    Serve,
    /// Refuse connections (the listener is closed).
    Refuse,
    /// Answer this status to every request.
    Fail(u16),
}

/// One recorded request.
#[derive(Clone, Debug, Serialize)]
pub struct Request {
    /// The endpoint's name.
    #[serde(serialize_with = "as_str")]
    pub endpoint: Arc<str>,
    /// `webhook-id` (empty when missing).
    pub id: String,
    /// `webhook-attempt` (0 when missing).
    pub attempt: u32,
    /// Arrival, in seconds on the scenario's clock.
    pub at: f64,
    /// When the answer was given (a hang: when the client gave up).
    pub answered_at: f64,
    /// The answer.
    pub answer: Answer,
    /// Whether a `v1` signature verified.
    pub signature_ok: bool,
    /// The `user-agent`: the dispatcher replica that sent it.
    pub agent: String,
}

fn as_str<S: serde::Serializer>(text: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(text)
}

/// Every request of a scenario's endpoints, and the first success of each id.
#[derive(Default)]
pub struct Tally {
    inner: Mutex<TallyInner>,
}

#[derive(Default)]
struct TallyInner {
    requests: Vec<Request>,
    first_success: HashMap<String, f64>,
}

impl Tally {
    fn lock(&self) -> MutexGuard<'_, TallyInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn record(&self, request: Request) {
        let mut inner = self.lock();
        if request.answer.is_success() {
            inner
                .first_success
                .entry(request.id.clone())
                .or_insert(request.at);
        }
        inner.requests.push(request);
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.lock().requests.clone()
    }

    /// Whether `id` was answered 2xx.
    pub fn delivered(&self, id: &str) -> bool {
        self.lock().first_success.contains_key(id)
    }
}

/// A running endpoint. Dropping it stops it.
pub struct Endpoint {
    name: Arc<str>,
    secret: String,
    gate: Gate,
    mode: watch::Sender<Mode>,
    /// Events for it count in the longest stall.
    pub healthy: bool,
    /// Its retries count in the retry lateness (false where the breaker's open time, not
    /// the backoff, sets the wait).
    pub lateness: bool,
}

struct Shared {
    name: Arc<str>,
    verifier: Verifier,
    behaviour: Behaviour,
    mode: watch::Receiver<Mode>,
    clock: Clock,
    tally: Arc<Tally>,
}

impl Endpoint {
    /// Starts the endpoint `name`, signing secret `secret` (`whsec_...`).
    pub async fn start(
        name: &str,
        secret: String,
        behaviour: Behaviour,
        clock: Clock,
        tally: Arc<Tally>,
    ) -> anyhow::Result<Endpoint> {
        let (mode, watch_mode) = watch::channel(Mode::Serve);
        let name: Arc<str> = Arc::from(name);
        let shared = Arc::new(Shared {
            name: Arc::clone(&name),
            verifier: Verifier::new(&secret)?,
            behaviour,
            mode: watch_mode,
            clock,
            tally,
        });
        let gate = Gate::start(move |stream, cut| serve(Arc::clone(&shared), stream, cut)).await?;
        Ok(Endpoint {
            name,
            secret,
            gate,
            mode,
            healthy: false,
            lateness: true,
        })
    }

    /// Its name (the endpoint id).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its signing secret.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The URL hookline delivers to.
    pub fn url(&self) -> String {
        format!("http://{}/hooks/{}", self.gate.addr(), self.name)
    }

    /// Switches its state.
    pub fn set_mode(&self, mode: Mode) {
        match mode {
            Mode::Refuse => self.gate.close(),
            Mode::Serve | Mode::Fail(_) => self.gate.open(),
        }
        self.mode.send_replace(mode);
    }
}

async fn serve(shared: Arc<Shared>, mut stream: TcpStream, mut cut: Cut) {
    let mut buf = Vec::new();
    loop {
        let request = tokio::select! {
            () = cut.closed() => return,
            request = http::read_request(&mut stream, &mut buf) => request,
        };
        let Ok(Some(request)) = request else {
            return;
        };
        let at = shared.clock.now();
        let id = request.header("webhook-id").unwrap_or_default().to_owned();
        let attempt = request
            .header("webhook-attempt")
            .and_then(|a| a.parse().ok())
            .unwrap_or(0);
        let signature_ok = shared.verifier.verify(
            &id,
            request.header("webhook-timestamp").unwrap_or_default(),
            &request.body,
            request.header("webhook-signature").unwrap_or_default(),
        );
        let mode = *shared.mode.borrow();
        let answer = match mode {
            Mode::Serve => (shared.behaviour)(&Ask { id: &id, attempt }),
            Mode::Fail(status) => Answer::Status(status),
            // Let in just before the gate closed: it is cut like the others.
            Mode::Refuse => Answer::Reset,
        };
        let record = |answered_at: f64| Request {
            endpoint: Arc::clone(&shared.name),
            id: id.clone(),
            attempt,
            at,
            answered_at,
            answer,
            signature_ok,
            agent: request.header("user-agent").unwrap_or_default().to_owned(),
        };
        match answer {
            Answer::Status(status) => {
                // Recorded before the client can see it, so a settled scenario has it.
                shared.tally.record(record(shared.clock.now()));
                if stream
                    .write_all(&http::response(status, false))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Answer::Reset => {
                shared.tally.record(record(at));
                reset(stream);
                return;
            }
            Answer::Hang => {
                // Wait for the client to give up (its read side closes), at most a minute.
                let mut sink = [0u8; 1024];
                let _ = tokio::time::timeout(Duration::from_secs(60), async {
                    while matches!(stream.read(&mut sink).await, Ok(read) if read > 0) {}
                })
                .await;
                shared.tally.record(record(shared.clock.now()));
                return;
            }
        }
    }
}

/// Drops the connection with a TCP reset instead of a FIN.
fn reset(stream: TcpStream) {
    // SO_LINGER 0: close() sends RST and returns at once; a non-zero linger would block,
    // which is why tokio deprecates the setter.
    #[expect(deprecated, reason = "a zero linger does not block on drop")]
    let _ = stream.set_linger(Some(Duration::ZERO));
    drop(stream);
}

#[cfg(test)]
mod tests {
    use hookline_core::signing::SigningSecret;

    use super::*;

    async fn post(
        url: &str,
        id: &str,
        attempt: u32,
        secret: &SigningSecret,
    ) -> reqwest::Result<u16> {
        let body = br#"{"n":1}"#;
        reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_millis(800))
            .build()?
            .post(url)
            .header("webhook-id", id)
            .header("webhook-timestamp", "1700000000")
            .header("webhook-signature", secret.sign(id, 1_700_000_000, body))
            .header("webhook-attempt", attempt.to_string())
            .header("user-agent", "test/1")
            .body(body.to_vec())
            .send()
            .await
            .map(|response| response.status().as_u16())
    }

    #[tokio::test]
    async fn answers_as_told_and_records_everything() {
        let secret = SigningSecret::generate(&mut rand::rng());
        let tally = Arc::new(Tally::default());
        let behaviour: Behaviour = Arc::new(|ask: &Ask<'_>| match ask.attempt {
            1 => Answer::Reset,
            2 => Answer::Hang,
            _ => Answer::Status(204),
        });
        let endpoint = Endpoint::start(
            "ep",
            secret.to_whsec(),
            behaviour,
            Clock::start(),
            Arc::clone(&tally),
        )
        .await
        .unwrap();
        let url = endpoint.url();
        assert!(post(&url, "a", 1, &secret).await.is_err(), "reset");
        assert!(
            post(&url, "a", 2, &secret).await.is_err(),
            "hang, timed out"
        );
        assert_eq!(post(&url, "a", 3, &secret).await.unwrap(), 204);
        let wrong = SigningSecret::generate(&mut rand::rng());
        assert_eq!(post(&url, "b", 3, &wrong).await.unwrap(), 204);
        endpoint.set_mode(Mode::Fail(503));
        assert_eq!(post(&url, "c", 1, &secret).await.unwrap(), 503);
        endpoint.set_mode(Mode::Refuse);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(post(&url, "c", 2, &secret).await.is_err(), "refused");

        tokio::time::sleep(Duration::from_millis(200)).await;
        let requests = tally.requests();
        let mut answers: Vec<_> = requests
            .iter()
            .map(|r| (r.id.as_str(), r.attempt, r.answer))
            .collect();
        // The hang is recorded when the client gives up, which may come after the next one.
        answers.sort_by_key(|(id, attempt, _)| (id.to_string(), *attempt));
        assert_eq!(
            answers,
            [
                ("a", 1, Answer::Reset),
                ("a", 2, Answer::Hang),
                ("a", 3, Answer::Status(204)),
                ("b", 3, Answer::Status(204)),
                ("c", 1, Answer::Status(503)),
            ]
        );
        let hang = requests.iter().find(|r| r.answer == Answer::Hang).unwrap();
        assert!(
            hang.answered_at - hang.at > 0.5,
            "answered when the client gave up"
        );
        let signed: Vec<_> = requests
            .iter()
            .map(|r| (r.id.as_str(), r.signature_ok))
            .collect();
        assert!(
            signed.iter().all(|(id, ok)| *ok == (*id != "b")),
            "{signed:?}"
        );
        assert!(tally.delivered("a") && tally.delivered("b") && !tally.delivered("c"));
        assert!(requests.iter().all(|r| r.agent == "test/1"));
    }
}
