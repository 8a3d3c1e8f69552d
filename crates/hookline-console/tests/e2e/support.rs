//! What the console's end-to-end tests share: a DLQ filled by a real dispatcher (a real
//! receiver on 127.0.0.1:0 that fails until it is fixed), the console served on a free
//! loopback port, and a small browser (reqwest with its own cookie jar, no redirects
//! followed) that reads forms off the pages.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hookline_console::auth::token::hash_token;
use hookline_console::config::UserConfig;
use hookline_console::{ConsoleConfig, ConsoleContext, ConsoleSettings, Role, bind, serve};
use hookline_core::WebhookEvent;
use hookline_core::secret::Secret;
use hookline_dispatcher::{DispatcherConfig, start};
use hookline_dlq::archive::store::StoreSettings;
use hookline_kafka::{KafkaSettings, Registry, TopicSpec, ensure_topics};
use hookline_producer::Topics;
use hookline_testkit::{
    Receiver, Reply, TestTopics, kafka_settings, read_all, registry_settings, unique_name,
};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, LOCATION, SET_COOKIE};
use tokio_util::sync::CancellationToken;

pub const DEADLINE: Duration = Duration::from_secs(60);
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
pub const SESSION_KEY: &str = "console-e2e-session-key-0123456789abcdef";

/// The session cookie's names: with `Secure` cookies, and without (a loopback console).
pub const SESSION_COOKIES: [&str; 2] = ["__Host-hookline_console", "hookline_console"];

/// The tokens of the test users, by role.
pub const OPERATOR_TOKEN: &str = "operator-token-8f3a1c9d";
pub const VIEWER_TOKEN: &str = "viewer-token-27b4e6f0aa";
pub const ADMIN_TOKEN: &str = "admin-token-5d9c0b7e11";

/// The users alice (operator), victor (viewer) and ada (admin).
pub fn users() -> Vec<UserConfig> {
    [
        ("alice", Role::Operator, OPERATOR_TOKEN),
        ("victor", Role::Viewer, VIEWER_TOKEN),
        ("ada", Role::Admin, ADMIN_TOKEN),
    ]
    .into_iter()
    .map(|(name, role, token)| UserConfig {
        name: name.to_owned(),
        role,
        token_hash: hash_token(token).expect("hash"),
    })
    .collect()
}

/// A console config with the test users and key.
pub fn console_config() -> ConsoleConfig {
    ConsoleConfig {
        listen: "127.0.0.1:0".to_owned(),
        session_key: Some(Secret::new(SESSION_KEY)),
        users: users(),
        ..ConsoleConfig::default()
    }
}

/// A console served on a free loopback port; stops when dropped.
pub struct Console {
    pub url: String,
    stop: CancellationToken,
}

impl Drop for Console {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Console {
    pub async fn start(settings: ConsoleSettings, topics: Topics) -> Console {
        let context = ConsoleContext {
            kafka: kafka_settings(),
            registry: Arc::new(Registry::new(&registry_settings()).expect("registry")),
            topics,
            archive: StoreSettings::default(),
        };
        let listener = bind(&settings.listen).await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let stop = CancellationToken::new();
        tokio::spawn(serve(listener, settings, context, stop.clone()));
        Console { url, stop }
    }

    pub fn browser(&self) -> Browser {
        self.browser_from(IpAddr::from([127, 0, 0, 1]))
    }

    /// A browser whose connections come from `address` (another loopback address, such as
    /// 127.0.0.2, is another client to the console).
    pub fn browser_from(&self, address: IpAddr) -> Browser {
        Browser {
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(DEADLINE)
                .local_address(address)
                .build()
                .expect("client"),
            base: self.url.clone(),
            cookies: BTreeMap::new(),
            extra: Vec::new(),
        }
    }
}

/// An answer: status, headers, body.
pub struct Page {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Page {
    pub fn location(&self) -> Option<&str> {
        self.headers.get(LOCATION).and_then(|v| v.to_str().ok())
    }

    /// The hidden and text fields of the form whose id is `id`, in order.
    pub fn form(&self, id: &str) -> Vec<(String, String)> {
        let start = self
            .body
            .find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("no form {id} in {}", self.body));
        let form = &self.body[start..];
        let form = &form[..form.find("</form>").expect("the form ends")];
        let mut fields = Vec::new();
        for input in form.split("<input").skip(1) {
            let input = &input[..input.find('>').unwrap_or(input.len())];
            if let (Some(name), Some(value)) = (attribute(input, "name"), attribute(input, "value"))
            {
                fields.push((name, value));
            }
        }
        fields
    }

    /// The CSRF token of the first form holding one.
    pub fn csrf(&self) -> String {
        let marker = "name=\"csrf\" value=\"";
        let start = self.body.find(marker).expect("a csrf field") + marker.len();
        self.body[start..][..64].to_owned()
    }
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let marker = format!(" {name}=\"");
    let start = tag.find(&marker)? + marker.len();
    let end = tag[start..].find('"')?;
    Some(unescape(&tag[start..start + end]))
}

/// HTML entities maud writes.
pub fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// A browser: cookies kept, redirects not followed.
pub struct Browser {
    client: reqwest::Client,
    base: String,
    cookies: BTreeMap<String, String>,
    /// Headers sent with every request (a proxy's).
    pub extra: Vec<(&'static str, String)>,
}

impl Browser {
    fn keep_cookies(&mut self, headers: &HeaderMap) {
        for value in headers.get_all(SET_COOKIE) {
            let text = value.to_str().expect("a cookie");
            let pair = text.split(';').next().expect("name=value");
            let (name, value) = pair.split_once('=').expect("name=value");
            let removed = text.contains("Max-Age=0") || value.is_empty();
            if removed {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Whether the browser holds a session cookie (either name).
    pub fn has_session(&self) -> bool {
        SESSION_COOKIES
            .iter()
            .any(|n| self.cookies.contains_key(*n))
    }

    /// The value of the cookie `name`, when the browser holds it.
    pub fn cookie(&self, name: &str) -> Option<String> {
        self.cookies.get(name).cloned()
    }

    /// Sets the cookie `name` as a replaying attacker would.
    pub fn set_cookie(&mut self, name: &str, value: &str) {
        self.cookies.insert(name.to_owned(), value.to_owned());
    }

    pub fn forget_cookies(&mut self) {
        self.cookies.clear();
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Page {
        let mut request = request.header("cookie", self.cookie_header());
        for (name, value) in &self.extra {
            request = request.header(*name, value);
        }
        let response = request.send().await.expect("the console answers");
        let status = response.status();
        let headers = response.headers().clone();
        self.keep_cookies(&headers);
        let body = response.text().await.expect("a body");
        Page {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&mut self, path: &str) -> Page {
        let request = self.client.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    pub async fn post(&mut self, path: &str, fields: &[(String, String)]) -> Page {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in fields {
            form.append_pair(name, value);
        }
        let request = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form.finish());
        self.send(request).await
    }

    /// Logs in as `user` with `token`; returns the login's answer.
    pub async fn login(&mut self, user: &str, token: &str) -> Page {
        let form = self.get("/login").await;
        assert_eq!(form.status, StatusCode::OK, "{}", form.body);
        let mut fields = form.form("login-form");
        fields.retain(|(name, _)| name != "user");
        fields.push(("user".to_owned(), user.to_owned()));
        fields.push(("token".to_owned(), token.to_owned()));
        self.post("/login", &fields).await
    }

    /// The fields of the confirmation page at `path`, ready to post.
    pub async fn confirm(&mut self, path: &str) -> (Page, Vec<(String, String)>) {
        let page = self.get(path).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        let fields = if page.body.contains("id=\"confirm-form\"") {
            page.form("confirm-form")
        } else {
            Vec::new()
        };
        (page, fields)
    }
}

/// A test's topics, a dispatcher over them, and a receiver: `ep-flaky` fails until
/// [`Parked::fix`], `ep-broken` always.
pub struct Parked {
    pub kafka: KafkaSettings,
    pub topics: TestTopics,
    pub receiver: Receiver,
    pub events: Vec<WebhookEvent>,
    fixed: Arc<AtomicBool>,
    shutdown: CancellationToken,
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Parked {
    pub fn names(&self) -> Topics {
        Topics::new(&self.topics.events, &self.topics.endpoints)
    }

    pub fn fix(&self) {
        self.fixed.store(true, Ordering::SeqCst);
    }

    /// Events for `ep-flaky` (`flaky` of them) and `ep-broken` (one), all parked by a
    /// dispatcher after two attempts each.
    pub async fn new(test: &str, flaky: usize) -> Parked {
        let receiver = Receiver::start().await;
        let fixed = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&fixed);
        let flaky_url = receiver.script("flaky", move |_| {
            Reply::Status(if flag.load(Ordering::SeqCst) {
                200
            } else {
                503
            })
        });
        let broken_url = receiver.script("broken", |_| Reply::Status(503));
        let endpoints = [("ep-flaky", flaky_url), ("ep-broken", broken_url)];
        let events: Vec<_> = std::iter::repeat_n("ep-flaky", flaky)
            .chain(["ep-broken"])
            .enumerate()
            .map(|(n, endpoint)| {
                let payload = format!(r#"{{"invoice":{n},"email":"jane{n}@example.com"}}"#);
                (endpoint, payload)
            })
            .collect();
        Parked::start(test, receiver, fixed, &endpoints, &events).await
    }

    /// One event for `ep-echo`, an endpoint that answers 503 with the body it was sent (as
    /// some receivers put the request into their errors), parked after two attempts: its
    /// payload `payload` is in the DLQ's error message, the retry header and the attempt
    /// log's response excerpts. The echoing server is returned with it.
    pub async fn echoed(test: &str, payload: &str) -> (Parked, Echo) {
        let echo = Echo::start().await;
        let receiver = Receiver::start().await;
        let fixed = Arc::new(AtomicBool::new(false));
        let endpoints = [("ep-echo", echo.url.clone())];
        let parked = Parked::start(
            test,
            receiver,
            fixed,
            &endpoints,
            &[("ep-echo", payload.to_owned())],
        )
        .await;
        (parked, echo)
    }

    /// Creates the test's topics, puts `endpoints` (id, URL) in the endpoint table, starts
    /// a dispatcher (two attempts 200 ms apart) and publishes `events` (endpoint, payload),
    /// then waits until each is parked.
    async fn start(
        test: &str,
        receiver: Receiver,
        fixed: Arc<AtomicBool>,
        endpoints: &[(&str, String)],
        events: &[(&str, String)],
    ) -> Parked {
        let kafka = kafka_settings();
        let topics = TestTopics::new(test, &["200ms"]);
        topics.create(&kafka, 2).await;
        ensure_topics(
            &kafka,
            &[
                TopicSpec::new(format!("{}.dlq-actions", topics.events), 1, 1)
                    .config("cleanup.policy", "compact"),
            ],
        )
        .await
        .expect("actions topic");
        let producer: FutureProducer = kafka.producer_config().create().expect("producer");
        for (id, url) in endpoints {
            let value = serde_json::json!({ "url": url, "secrets": [SECRET] }).to_string();
            producer
                .send(
                    FutureRecord::to(&topics.endpoints).key(*id).payload(&value),
                    DEADLINE,
                )
                .await
                .expect("endpoint");
        }
        let mut config = DispatcherConfig {
            kafka: kafka.clone(),
            registry: registry_settings(),
            group_id: unique_name("dispatchers"),
            ..DispatcherConfig::default()
        };
        config.topics.events = topics.events.clone();
        config.topics.endpoints = topics.endpoints.clone();
        config.topics.retry_tiers = topics.tiers.clone();
        config.retry.strategy = hookline_core::policy::StrategyKind::Fixed;
        config.retry.base_ms = 200;
        config.retry.cap_ms = 200;
        config.retry.max_attempts = 2;
        config.breaker.minimum_requests = 0;
        config.outbound.allow_loopback = true;
        config.admin.listen = "127.0.0.1:0".to_owned();
        config.http.timeout_ms = 2_000;
        let shutdown = CancellationToken::new();
        let running = start(config.into_settings().expect("config"), shutdown.clone())
            .await
            .expect("dispatcher");
        tokio::spawn(running.wait());
        let mut published = Vec::new();
        for (n, (endpoint, payload)) in events.iter().enumerate() {
            let event = WebhookEvent {
                event_id: format!("evt-{}-{n}", unique_name("console")),
                event_type: if n == 0 {
                    "invoice.paid"
                } else {
                    "invoice.voided"
                }
                .to_owned(),
                endpoint_id: Some((*endpoint).to_owned()),
                tenant_id: None,
                channels: Vec::new(),
                endpoint_url: None,
                payload: payload.clone().into_bytes(),
                content_type: "application/json".to_owned(),
                headers: std::collections::BTreeMap::new(),
                created_at_ms: 1_700_000_000_000,
                expires_at_ms: None,
            };
            let headers = OwnedHeaders::new().insert(Header {
                key: "webhook-id",
                value: Some(&event.event_id),
            });
            producer
                .send(
                    FutureRecord::to(&topics.events)
                        .key(*endpoint)
                        .payload(&event.to_json())
                        .headers(headers),
                    DEADLINE,
                )
                .await
                .expect("event");
            published.push(event);
        }
        read_all(&kafka, &topics.dlq, events.len(), DEADLINE).await;
        Parked {
            kafka,
            topics,
            receiver,
            events: published,
            fixed,
            shutdown,
        }
    }

    /// The DLQ place of `event_id`, from the list page's rows (`data-place`).
    pub fn place_in(page: &Page, event_id: &str) -> String {
        let row_end = page
            .body
            .find(&format!(">{event_id}</a>"))
            .unwrap_or_else(|| panic!("{event_id} is listed: {}", page.body));
        let row_start =
            page.body[..row_end].rfind("data-place=\"").expect("a row") + "data-place=\"".len();
        let end = page.body[row_start..].find('"').expect("end");
        page.body[row_start..row_start + end].to_owned()
    }
}

/// An endpoint on 127.0.0.1:0 that answers every POST with 503 and the body it was sent;
/// stops when dropped.
pub struct Echo {
    pub url: String,
    stop: CancellationToken,
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Echo {
    pub async fn start() -> Echo {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let url = format!("http://{}/hook", listener.local_addr().expect("address"));
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(|body: axum::body::Bytes| async move {
                (axum::http::StatusCode::SERVICE_UNAVAILABLE, body)
            }),
        );
        let stop = CancellationToken::new();
        let until = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(until.cancelled_owned())
                .await;
        });
        Echo { url, stop }
    }
}

/// How many times `needle` occurs in `hay`.
pub fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// Fields as owned pairs.
pub fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

pub type Map = HashMap<String, String>;
