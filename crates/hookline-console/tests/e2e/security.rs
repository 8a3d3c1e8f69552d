//! The console's defences, through HTTP as a browser (or an attacker) sends it: a login
//! flood, repeated bad logins from one address, a session cookie replayed after logout,
//! the cookies' names and attributes, and payloads an endpoint echoes kept from viewers.

use std::net::IpAddr;

use argon2::password_hash::SaltString;
use argon2::{Algorithm, Argon2, Params, PasswordHasher, Version};
use hookline_console::Role;
use hookline_console::config::UserConfig;
use hookline_producer::Topics;
use hookline_testkit::TestTopics;
use reqwest::StatusCode;

use crate::support::{
    Console, DEADLINE, OPERATOR_TOKEN, Page, Parked, SESSION_COOKIES, VIEWER_TOKEN, console_config,
    fields,
};

/// The topic names of a test that reads no topic (logins, cookies).
fn unused_topics(test: &str) -> Topics {
    let topics = TestTopics::new(test, &[]);
    Topics::new(&topics.events, &topics.endpoints)
}

/// A hash ten times as slow to check as `hash-token`'s (t=20 instead of 2), so that a
/// verification is still running when the other requests of a flood arrive.
fn slow_hash(token: &str) -> String {
    let params = Params::new(19_456, 20, 1, None).expect("params");
    let salt = SaltString::encode_b64(b"flood-test-salt!").expect("salt");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password(token.as_bytes(), &salt)
        .expect("hash")
        .to_string()
}

/// The `Set-Cookie` header of the response that sets (or removes) the cookie `name`.
fn set_cookie<'a>(page: &'a Page, name: &str) -> Option<&'a str> {
    page.headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with(&format!("{name}=")))
}

fn retry_after_s(page: &Page) -> u64 {
    page.headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a Retry-After in seconds: {:?}", page.headers))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_login_flood_beyond_the_verification_permits_is_refused_at_once_and_a_good_login_still_works()
 {
    let mut config = console_config();
    config.users.push(UserConfig {
        name: "slow".to_owned(),
        role: Role::Viewer,
        token_hash: slow_hash("slow-token-0123456789"),
    });
    let settings = config.into_settings().expect("valid");
    let console = Console::start(settings, unused_topics("console-flood")).await;

    // Twelve clients, each from an address of its own (no per-address back-off applies),
    // send a wrong token at once.
    let mut clients = Vec::new();
    for n in 0..12_u8 {
        let mut browser = console.browser_from(IpAddr::from([127, 0, 1, n + 1]));
        let form = browser.get("/login").await;
        assert_eq!(form.status, StatusCode::OK, "{}", form.body);
        let mut fields = form.form("login-form");
        fields.retain(|(name, _)| name != "user");
        fields.push(("user".to_owned(), "slow".to_owned()));
        fields.push(("token".to_owned(), "not-the-slow-token".to_owned()));
        clients.push((browser, fields));
    }
    let answers = futures::future::join_all(
        clients
            .iter_mut()
            .map(|(browser, fields)| browser.post("/login", fields)),
    )
    .await;
    let busy: Vec<&Page> = answers
        .iter()
        .filter(|p| p.status == StatusCode::SERVICE_UNAVAILABLE)
        .collect();
    let statuses: Vec<StatusCode> = answers.iter().map(|p| p.status).collect();
    assert!(
        !busy.is_empty(),
        "more logins at once than the console checks at once, yet none was refused: {statuses:?}"
    );
    for page in &busy {
        assert!(retry_after_s(page) >= 1);
        assert!(page.body.contains("busy"), "{}", page.body);
    }
    for page in &answers {
        assert!(
            [StatusCode::UNAUTHORIZED, StatusCode::SERVICE_UNAVAILABLE].contains(&page.status),
            "{statuses:?}"
        );
    }

    // Once the flood is over, a good login works.
    let mut alice = console.browser();
    let login = alice.login("alice", OPERATOR_TOKEN).await;
    assert_eq!(login.status, StatusCode::SEE_OTHER, "{}", login.body);
    assert!(alice.has_session());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_bad_logins_from_one_address_get_429_and_other_addresses_still_log_in() {
    let settings = console_config().into_settings().expect("valid");
    let console = Console::start(settings, unused_topics("console-lockout")).await;

    let mut mallory = console.browser_from(IpAddr::from([127, 0, 0, 2]));
    let mut statuses = Vec::new();
    let refused = loop {
        let page = mallory.login("alice", "guessing-the-token").await;
        statuses.push(page.status);
        if page.status != StatusCode::UNAUTHORIZED || statuses.len() > 20 {
            break page;
        }
    };
    assert_eq!(
        refused.status,
        StatusCode::TOO_MANY_REQUESTS,
        "bad logins from one address: {statuses:?}"
    );
    assert!(retry_after_s(&refused) >= 1);
    assert!(
        refused.body.contains("Too many failed logins"),
        "{}",
        refused.body
    );
    // The address is refused for a while, whatever it sends: no token is checked for it.
    let right = mallory.login("alice", OPERATOR_TOKEN).await;
    assert_eq!(right.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(!mallory.has_session());

    // Another address logs in.
    let mut alice = console.browser();
    let login = alice.login("alice", OPERATOR_TOKEN).await;
    assert_eq!(login.status, StatusCode::SEE_OTHER, "{}", login.body);
    assert_eq!(alice.get("/events").await.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_logout_the_old_session_cookie_is_refused() {
    let settings = console_config().into_settings().expect("valid");
    let console = Console::start(settings, unused_topics("console-logout")).await;
    let mut alice = console.browser();
    let login = alice.login("alice", OPERATOR_TOKEN).await;
    assert_eq!(login.status, StatusCode::SEE_OTHER, "{}", login.body);
    let name = SESSION_COOKIES
        .into_iter()
        .find(|n| alice.cookie(n).is_some())
        .expect("a session cookie");
    let stolen = alice.cookie(name).expect("the session cookie");
    let page = alice.get("/events").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let csrf = page.csrf();

    let logout = alice.post("/logout", &fields(&[("csrf", &csrf)])).await;
    assert_eq!(logout.status, StatusCode::SEE_OTHER);
    assert!(!alice.has_session(), "the browser is told to drop it");

    // Someone who kept the cookie (and the page's CSRF token) replays it.
    let mut replay = console.browser();
    replay.set_cookie(name, &stolen);
    let page = replay.get("/events").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert!(
        page.location().is_some_and(|l| l.starts_with("/login")),
        "{:?}",
        page.location()
    );
    let post = replay
        .post("/dlq/act/note", &fields(&[("csrf", &csrf), ("note", "x")]))
        .await;
    assert_eq!(post.status, StatusCode::FORBIDDEN, "{}", post.body);

    // Logging in again gives a new session that works.
    let again = alice.login("alice", OPERATOR_TOKEN).await;
    assert_eq!(again.status, StatusCode::SEE_OTHER, "{}", again.body);
    assert_eq!(alice.get("/events").await.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_cookies_have_host_prefixed_names_and_a_loopback_console_works_over_http() {
    // On loopback, by default: plain names without `Secure`, so that a browser keeps them
    // over plain HTTP.
    let settings = console_config().into_settings().expect("valid");
    let console = Console::start(settings, unused_topics("console-cookies")).await;
    let mut local = console.browser();
    let login = local.login("alice", OPERATOR_TOKEN).await;
    assert_eq!(login.status, StatusCode::SEE_OTHER, "{}", login.body);
    let cookie = set_cookie(&login, "hookline_console").expect("a session cookie");
    assert!(!cookie.contains("Secure"), "{cookie}");
    assert_eq!(local.get("/events").await.status, StatusCode::OK);

    // With secure_cookies: `__Host-` names, `Secure`, `Path=/` and no `Domain` (which the
    // prefix requires), `HttpOnly` and `SameSite=Strict`.
    let mut config = console_config();
    config.secure_cookies = Some(true);
    let settings = config.into_settings().expect("valid");
    let console = Console::start(settings, unused_topics("console-cookies")).await;
    let mut alice = console.browser();
    let form = alice.get("/login").await;
    let login_cookie = set_cookie(&form, "__Host-hookline_console_login")
        .unwrap_or_else(|| panic!("the login form's cookie: {:?}", form.headers));
    let login = alice.login("alice", OPERATOR_TOKEN).await;
    assert_eq!(login.status, StatusCode::SEE_OTHER, "{}", login.body);
    let session = set_cookie(&login, "__Host-hookline_console")
        .unwrap_or_else(|| panic!("the session cookie: {:?}", login.headers));
    for cookie in [login_cookie, session] {
        for attribute in ["; Secure", "; HttpOnly", "; SameSite=Strict", "; Path=/"] {
            assert!(cookie.contains(attribute), "{attribute} in {cookie}");
        }
        assert!(!cookie.contains("Domain"), "{cookie}");
    }
    assert!(
        set_cookie(&login, "hookline_console").is_none(),
        "no cookie without the prefix"
    );
    let page = alice.get("/events").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    // The removal at logout carries the same attributes, or a browser would ignore it.
    let logout = alice
        .post("/logout", &fields(&[("csrf", &page.csrf())]))
        .await;
    let removal = set_cookie(&logout, "__Host-hookline_console")
        .unwrap_or_else(|| panic!("the removal: {:?}", logout.headers));
    assert!(
        removal.contains("Max-Age=0")
            && removal.contains("; Secure")
            && removal.contains("; Path=/"),
        "{removal}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn viewers_see_no_payload_that_an_endpoint_echoed_where_operators_do() {
    const MARKER: &str = "echo-marker-7c1e9a";
    let payload = format!(r#"{{"note":"{MARKER}"}}"#);
    let (parked, _echo) = Parked::echoed("console-echo", &payload).await;
    let settings = console_config().into_settings().expect("valid");
    assert!(settings.hide_payloads_from_viewer, "the default");
    let console = Console::start(settings, parked.names()).await;
    let event_id = parked.events[0].event_id.clone();
    let mut alice = console.browser();
    assert_eq!(
        alice.login("alice", OPERATOR_TOKEN).await.status,
        StatusCode::SEE_OTHER
    );
    let mut victor = console.browser();
    assert_eq!(
        victor.login("victor", VIEWER_TOKEN).await.status,
        StatusCode::SEE_OTHER
    );

    // The attempt log is written a little after the attempts: waited for.
    let event_path = format!("/events?id={event_id}");
    let give_up = tokio::time::Instant::now() + DEADLINE;
    loop {
        let page = alice.get(&event_path).await;
        if page.body.contains("step-parked") && page.body.contains(MARKER) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "the event page never showed the echo: {}",
            page.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let list = alice.get("/dlq").await;
    let place = Parked::place_in(&list, &event_id);
    let paths = [
        "/dlq".to_owned(),
        format!("/dlq/records/{place}"),
        event_path,
        "/endpoints".to_owned(),
    ];
    for path in &paths {
        let seen = alice.get(path).await;
        assert_eq!(seen.status, StatusCode::OK, "{path}: {}", seen.body);
        assert!(
            seen.body.contains(MARKER),
            "{path} shows the echo to an operator: {}",
            seen.body
        );
        let seen = victor.get(path).await;
        assert_eq!(seen.status, StatusCode::OK, "{path}: {}", seen.body);
        assert!(seen.body.contains("victor · viewer"));
        assert!(
            !seen.body.contains(MARKER),
            "{path} shows the payload's echo to a viewer: {}",
            seen.body
        );
        assert!(
            seen.body.contains("(hidden: may echo the payload)"),
            "{path} says what is hidden: {}",
            seen.body
        );
    }
}
