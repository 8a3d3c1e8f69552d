//! The DLQ pages and actions, per role, through HTTP as a browser sends it.

use hookline_testkit::wait_until;
use reqwest::StatusCode;

use crate::support::{
    ADMIN_TOKEN, Console, DEADLINE, OPERATOR_TOKEN, Parked, VIEWER_TOKEN, console_config, count,
    fields,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operators_redrive_and_resolve_viewers_only_read_and_every_post_needs_its_csrf_token() {
    let parked = Parked::new("console", 2).await;
    let settings = console_config().into_settings().expect("valid");
    let console = Console::start(settings, parked.names()).await;
    let (flaky_a, flaky_b, broken) = (
        parked.events[0].event_id.clone(),
        parked.events[1].event_id.clone(),
        parked.events[2].event_id.clone(),
    );

    // Nobody gets in without a token, and a wrong token is refused.
    let mut stranger = console.browser();
    let page = stranger.get("/dlq").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert!(
        page.location()
            .is_some_and(|l| l.starts_with("/login?next=%2Fdlq"))
    );
    let refused = stranger.login("alice", "not-the-token-at-all").await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(
        refused
            .body
            .contains("That user name and token are not valid here.")
    );
    assert!(!stranger.has_session());

    // The operator logs in: a signed session cookie, HttpOnly, SameSite=Strict, Path=/.
    let mut alice = console.browser();
    let login = alice.login("alice", OPERATOR_TOKEN).await;
    assert_eq!(login.status, StatusCode::SEE_OTHER, "{}", login.body);
    let cookie = login
        .headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("hookline_console="))
        .expect("a session cookie")
        .to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }

    // The list: every record, newest first, counted by reason and endpoint.
    let list = alice.get("/dlq").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert!(
        list.headers["content-security-policy"]
            .to_str()
            .expect("text")
            .starts_with("default-src 'self'")
    );
    assert!(list.body.contains("3 records"), "{}", list.body);
    for id in [&flaky_a, &flaky_b, &broken] {
        assert!(list.body.contains(id.as_str()), "{id} listed");
    }
    assert!(list.body.contains("retries_exhausted"));
    assert!(list.body.contains("alice · operator"));
    // Filtered by endpoint and by event type, as `dlq inspect` filters.
    let by_endpoint = alice.get("/dlq?endpoint=ep-flaky").await;
    assert!(
        by_endpoint.body.contains("2 records match"),
        "{}",
        by_endpoint.body
    );
    assert!(!by_endpoint.body.contains(broken.as_str()));
    let by_type = alice.get("/dlq?event_type=invoice.paid").await;
    assert!(
        by_type.body.contains("1 record matches"),
        "{}",
        by_type.body
    );
    let bad = alice.get("/dlq?reason=no_such_reason").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("unknown error reason"));

    // One record's page: the envelope, the original event, no history yet.
    let place_a = Parked::place_in(&list, &flaky_a);
    let record = alice.get(&format!("/dlq/records/{place_a}")).await;
    assert_eq!(record.status, StatusCode::OK, "{}", record.body);
    assert!(
        record.body.contains("jane0@example.com"),
        "the payload, for an operator"
    );
    assert!(record.body.contains("ep-flaky"));
    assert!(record.body.contains("No operator action yet."));
    assert!(record.body.contains("redrive-button"));

    // A POST without the CSRF token, or with another one, is refused and writes nothing.
    let mut confirm_fields = Vec::new();
    let (confirm, redrive_fields) = alice
        .confirm(&format!("/dlq/confirm/redrive?record={place_a}&status=all"))
        .await;
    assert!(
        confirm
            .body
            .contains("This will redrive <strong>1</strong> record"),
        "{}",
        confirm.body
    );
    confirm_fields.extend(redrive_fields.clone());
    let without: Vec<_> = redrive_fields
        .iter()
        .filter(|(n, _)| n != "csrf")
        .cloned()
        .collect();
    assert_eq!(
        alice.post("/dlq/act/redrive", &without).await.status,
        StatusCode::FORBIDDEN
    );
    let mut wrong = without.clone();
    wrong.push(("csrf".into(), "0".repeat(64)));
    assert_eq!(
        alice.post("/dlq/act/redrive", &wrong).await.status,
        StatusCode::FORBIDDEN
    );
    let unchanged = alice.get(&format!("/dlq/records/{place_a}")).await;
    assert!(unchanged.body.contains("No operator action yet."));

    // The endpoint is fixed; the redrive is confirmed; the endpoint receives the event.
    parked.fix();
    let done = alice.post("/dlq/act/redrive", &confirm_fields).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert!(
        done.body.contains("Redrove <strong>1</strong> record"),
        "{}",
        done.body
    );
    wait_until(
        DEADLINE,
        "the redriven event reaches the endpoint",
        || async {
            parked
                .receiver
                .received("flaky")
                .iter()
                .any(|r| {
                    r.reply == hookline_testkit::Reply::Status(200)
                        && r.header("webhook-id") == Some(flaky_a.as_str())
                })
                .then_some(())
        },
    )
    .await;
    let history = alice.get(&format!("/dlq/records/{place_a}")).await;
    assert!(
        history
            .body
            .contains("<td>redriven</td><td>alice</td><td>operator</td>"),
        "{}",
        history.body
    );
    assert!(
        !history.body.contains("redrive-button"),
        "a redriven record offers no second redrive"
    );
    // Posting the same redrive again sends nothing: idempotent, as the CLI.
    let again = alice.post("/dlq/act/redrive", &confirm_fields).await;
    assert!(
        again.body.contains("Redrove <strong>0</strong> records"),
        "{}",
        again.body
    );
    assert!(again.body.contains("1 already redriven or resolved"));
    let delivered = parked
        .receiver
        .received("flaky")
        .iter()
        .filter(|r| {
            r.header("webhook-id") == Some(flaky_a.as_str())
                && r.reply == hookline_testkit::Reply::Status(200)
        })
        .count();
    assert_eq!(delivered, 1);

    // The other record is resolved with a note, which its history shows.
    let place_b = Parked::place_in(&list, &flaky_b);
    let (confirm, fields_b) = alice
        .confirm(&format!(
            "/dlq/confirm/resolve?record={place_b}&status=all&note=receiver+retired"
        ))
        .await;
    assert!(confirm.body.contains("receiver retired"));
    let resolved = alice.post("/dlq/act/resolve", &fields_b).await;
    assert!(
        resolved.body.contains("Resolved <strong>1</strong> record"),
        "{}",
        resolved.body
    );
    let history = alice.get(&format!("/dlq/records/{place_b}")).await;
    assert!(history.body.contains("<td>resolved</td><td>alice</td><td>operator</td><td class=\"wrap\">receiver retired</td>"), "{}", history.body);
    // The open list no longer shows either; the resolved filter shows the one resolved.
    let open = alice.get("/dlq").await;
    assert!(open.body.contains(">1 record<"), "{}", open.body);
    let resolved_list = alice.get("/dlq?status=resolved").await;
    assert!(
        resolved_list.body.contains(flaky_b.as_str())
            && !resolved_list.body.contains(broken.as_str())
    );

    // The event's page tells the parking, the redrive and the delivery (the attempt log is
    // written a little after the delivery: waited for).
    let give_up = tokio::time::Instant::now() + DEADLINE;
    loop {
        let event = alice.get(&format!("/events?id={flaky_a}")).await;
        let steps = ["step-parked", "step-redriven", "step-delivered"];
        if event.status == StatusCode::OK && steps.iter().all(|s| event.body.contains(s)) {
            assert!(event.body.contains("HTTP 503") && event.body.contains("HTTP 200"));
            break;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "the event page never told the whole story: {}",
            event.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // A viewer reads but cannot act: no buttons, 403 on the confirmation and on the POST.
    let mut victor = console.browser();
    assert_eq!(
        victor.login("victor", VIEWER_TOKEN).await.status,
        StatusCode::SEE_OTHER
    );
    let place_c = Parked::place_in(&open, &broken);
    let seen = victor.get(&format!("/dlq/records/{place_c}")).await;
    assert_eq!(seen.status, StatusCode::OK);
    assert!(seen.body.contains("victor · viewer"));
    for absent in [
        "redrive-button",
        "resolve-button",
        "note-button",
        "/dlq/confirm/",
    ] {
        assert_eq!(count(&seen.body, absent), 0, "{absent} shown to a viewer");
    }
    assert!(
        !seen.body.contains("jane2@example.com"),
        "payloads are hidden from viewers"
    );
    let list = victor.get("/dlq").await;
    assert!(!list.body.contains("/dlq/confirm/"));
    let confirm = victor
        .get(&format!(
            "/dlq/confirm/resolve?record={place_c}&status=all&note=x"
        ))
        .await;
    assert_eq!(confirm.status, StatusCode::FORBIDDEN);
    let mut post = fields(&[("record", &place_c), ("status", "all"), ("note", "x")]);
    post.push(("csrf".into(), seen.csrf()));
    let refused = victor.post("/dlq/act/resolve", &post).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let still_open = alice.get(&format!("/dlq/records/{place_c}")).await;
    assert!(still_open.body.contains("No operator action yet."));

    // An admin annotates with a ticket id; the status stays open.
    let mut ada = console.browser();
    assert_eq!(
        ada.login("ada", ADMIN_TOKEN).await.status,
        StatusCode::SEE_OTHER
    );
    let (_, note_fields) = ada
        .confirm(&format!(
            "/dlq/confirm/note?record={place_c}&status=all&ticket=OPS-42&note=looking"
        ))
        .await;
    let noted = ada.post("/dlq/act/note", &note_fields).await;
    assert!(
        noted.body.contains("Annotated <strong>1</strong> record"),
        "{}",
        noted.body
    );
    let history = ada.get(&format!("/dlq/records/{place_c}")).await;
    assert!(
        history.body.contains(
            "<td>note</td><td>ada</td><td>admin</td><td class=\"wrap\">ticket OPS-42: looking</td>"
        ),
        "{}",
        history.body
    );
    assert!(history.body.contains("badge open"));

    // Endpoints: the admin disables one and enables it again; the operator cannot.
    let endpoints = alice.get("/endpoints").await;
    assert_eq!(endpoints.status, StatusCode::OK, "{}", endpoints.body);
    assert!(endpoints.body.contains("ep-flaky") && endpoints.body.contains("ep-broken"));
    assert_eq!(
        count(&endpoints.body, "/endpoints/confirm"),
        0,
        "no buttons for an operator"
    );
    let confirm = alice
        .get("/endpoints/confirm?id=ep-broken&op=disable")
        .await;
    assert_eq!(confirm.status, StatusCode::FORBIDDEN);
    let mut post = fields(&[("id", "ep-broken"), ("op", "disable")]);
    post.push(("csrf".into(), endpoints.csrf()));
    assert_eq!(
        alice.post("/endpoints/act", &post).await.status,
        StatusCode::FORBIDDEN
    );
    let listed = ada.get("/endpoints").await;
    assert!(
        listed.body.contains("id=\"disable-ep-broken\""),
        "{}",
        listed.body
    );
    let (_, mut disable) = ada
        .confirm("/endpoints/confirm?id=ep-broken&op=disable")
        .await;
    disable.push(("reason".into(), "receiver migrating".into()));
    let done = ada.post("/endpoints/act", &disable).await;
    assert!(
        done.body
            .contains("Disabled endpoint ep-broken: manual by ada (admin): receiver migrating."),
        "{}",
        done.body
    );
    let listed = ada.get("/endpoints").await;
    assert!(
        listed.body.contains("id=\"enable-ep-broken\""),
        "{}",
        listed.body
    );
    assert!(
        listed
            .body
            .contains("manual by ada (admin): receiver migrating")
    );
    let (_, enable) = ada
        .confirm("/endpoints/confirm?id=ep-broken&op=enable")
        .await;
    let done = ada.post("/endpoints/act", &enable).await;
    assert!(
        done.body.contains("Enabled endpoint ep-broken."),
        "{}",
        done.body
    );

    // Logging out ends the session.
    let logout = ada
        .post("/logout", &fields(&[("csrf", &history.csrf())]))
        .await;
    assert_eq!(logout.status, StatusCode::SEE_OTHER);
    assert_eq!(ada.get("/dlq").await.status, StatusCode::SEE_OTHER);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_proxy_the_trusted_header_names_the_user_and_nothing_else_does() {
    let parked_topics = hookline_testkit::TestTopics::new("console-proxy", &[]);
    parked_topics
        .create(&hookline_testkit::kafka_settings(), 1)
        .await;
    let mut config = console_config();
    config.trusted_header = Some("X-Forwarded-User".into());
    config.trusted_role_header = Some("X-Forwarded-Role".into());
    config
        .trusted_roles
        .insert("bob".into(), hookline_console::Role::Admin);
    let topics = hookline_producer::Topics::new(&parked_topics.events, &parked_topics.endpoints);
    let console = Console::start(config.into_settings().expect("valid"), topics.clone()).await;

    let mut bob = console.browser();
    bob.extra.push(("x-forwarded-user", "bob".into()));
    bob.extra.push(("x-forwarded-role", "viewer".into()));
    let page = bob.get("/dlq").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("bob · admin"),
        "the map wins over the role header"
    );
    assert!(page.body.contains("No dead letters here."));
    // His session's CSRF token is stable across requests, and checked.
    let token = page.csrf();
    assert_eq!(bob.get("/dlq").await.csrf(), token);
    let no_token = bob.post("/dlq/act/note", &fields(&[("note", "x")])).await;
    assert_eq!(no_token.status, StatusCode::FORBIDDEN);

    let mut carol = console.browser();
    carol.extra.push(("x-forwarded-user", "carol".into()));
    carol.extra.push(("x-forwarded-role", "operator".into()));
    assert!(carol.get("/dlq").await.body.contains("carol · operator"));
    let mut dave = console.browser();
    dave.extra.push(("x-forwarded-user", "dave".into()));
    assert_eq!(dave.get("/dlq").await.status, StatusCode::FORBIDDEN);
    // Without the header: the login page, as without a proxy.
    let mut direct = console.browser();
    assert_eq!(direct.get("/dlq").await.status, StatusCode::SEE_OTHER);

    // With the trusted header off, the same header is ignored.
    let console = Console::start(console_config().into_settings().expect("valid"), topics).await;
    let mut forged = console.browser();
    forged.extra.push(("x-forwarded-user", "bob".into()));
    assert_eq!(forged.get("/dlq").await.status, StatusCode::SEE_OTHER);
}
