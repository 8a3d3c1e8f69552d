use super::*;

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client")
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    id: Option<&str>,
) -> reqwest::Result<StatusCode> {
    let mut request = client.post(url);
    if let Some(id) = id {
        request = request.header("webhook-id", id);
    }
    Ok(request.send().await?.status())
}

#[tokio::test]
async fn counts_an_id_once_per_query_string() {
    let sink = Sink::start().await.expect("sink");
    sink.reset(4, "run-");
    let client = client();
    let base = sink.url();
    for (url, id) in [
        (base.clone(), "run-a"),
        (base.clone(), "run-a"),
        (base.clone(), "run-b"),
        (format!("{base}?ep=1"), "run-a"),
        (format!("{base}?ep=1"), "run-a"),
        (format!("{base}?ep=2"), "run-a"),
    ] {
        assert_eq!(
            post(&client, &url, Some(id)).await.expect("posted"),
            StatusCode::NO_CONTENT
        );
    }
    assert_eq!(
        post(&client, &base, None).await.expect("posted"),
        StatusCode::NO_CONTENT
    );
    assert!(sink.wait_distinct(4, Duration::from_secs(5)).await);
    let seen = sink.seen();
    assert_eq!((seen.requests, seen.distinct, seen.without_id), (7, 4, 1));
    assert!(seen.all_at.is_some());
}

#[tokio::test]
async fn another_runs_ids_are_foreign_and_not_counted() {
    let sink = Sink::start().await.expect("sink");
    sink.reset(1, "round2-");
    let client = client();
    post(&client, &sink.url(), Some("round1-0000001"))
        .await
        .expect("posted");
    post(&client, &sink.url(), Some("round2-0000001"))
        .await
        .expect("posted");
    let seen = sink.seen();
    assert_eq!((seen.requests, seen.distinct, seen.foreign), (2, 1, 1));
}

#[tokio::test]
async fn flaky_fails_each_delivery_once_and_measures_the_retry_against_its_due_time() {
    let sink = Sink::start().await.expect("sink");
    sink.reset(2, "r-");
    let client = client();
    let flaky = format!("{}?delay_ms=200", sink.route_url("flaky"));
    assert_eq!(
        post(&client, &flaky, Some("r-1")).await.expect("posted"),
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(
        post(&client, &flaky, Some("r-2")).await.expect("posted"),
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert!(sink.wait_failed_first(2, Duration::from_secs(1)).await);
    // One retried at once (200 ms early), one after its due time.
    assert_eq!(
        post(&client, &flaky, Some("r-1")).await.expect("posted"),
        StatusCode::NO_CONTENT
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        post(&client, &flaky, Some("r-2")).await.expect("posted"),
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        post(&client, &flaky, Some("r-2")).await.expect("posted"),
        StatusCode::NO_CONTENT
    );
    assert!(sink.wait_distinct(2, Duration::from_secs(1)).await);
    let lateness = sink.lateness();
    assert_eq!(lateness.count, 2);
    assert!(lateness.p50_ms < -150.0, "{lateness:?}");
    assert!((50.0..1000.0).contains(&lateness.max_ms), "{lateness:?}");
    assert_eq!(sink.seen().failed_first, 2);
}

#[tokio::test]
async fn latency_counts_from_the_published_header_or_the_reset() {
    let sink = Sink::start().await.expect("sink");
    sink.reset(2, "l-");
    let client = client();
    // Published 300 ms from now is impossible; 1 h ago counts from the reset instead.
    let hour_ago = now_us() - 3_600_000_000;
    for (id, published) in [("l-1", hour_ago), ("l-2", now_us())] {
        let status = client
            .post(sink.route_url("slow"))
            .header("webhook-id", id)
            .header(PUBLISHED_HEADER, published.to_string())
            .send()
            .await
            .expect("posted")
            .status();
        assert_eq!(status, StatusCode::NO_CONTENT);
    }
    let latency = sink.latency();
    assert_eq!(latency.count, 2);
    // Each waited SLOW_MS in the sink; none counts the hour before the reset.
    assert!(latency.p50_ms >= SLOW_MS as f64, "{latency:?}");
    assert!(latency.max_ms < 2_000.0, "{latency:?}");
}

#[tokio::test]
async fn dead_never_answers() {
    let sink = Sink::start().await.expect("sink");
    sink.reset(1, "d-");
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(200))
        .build()
        .expect("client");
    let error = post(&client, &sink.route_url("dead"), Some("d-1"))
        .await
        .expect_err("no answer");
    assert!(error.is_timeout(), "{error}");
    let seen = sink.seen();
    assert_eq!((seen.requests, seen.distinct), (1, 0));
}

#[tokio::test]
async fn neighbours_misbehave_by_kind_and_are_counted_apart() {
    let sink = Sink::start().await.expect("sink");
    sink.reset(1, "run-");
    let client = client();
    let status = |kind| {
        let client = client.clone();
        let url = sink.neighbour_url(kind, 7);
        async move { post(&client, &url, Some("run-a")).await }
    };
    assert_eq!(
        status(Misbehaviour::Fail).await.expect("answered"),
        StatusCode::INTERNAL_SERVER_ERROR
    );
    let throttled = client
        .post(sink.neighbour_url(Misbehaviour::Throttle, 7))
        .send()
        .await
        .expect("answered");
    assert_eq!(throttled.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(throttled.headers()["retry-after"], "1");
    assert_eq!(
        status(Misbehaviour::Slow).await.expect("answered"),
        StatusCode::NO_CONTENT
    );
    let hung = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(200))
        .build()
        .expect("client")
        .post(sink.neighbour_url(Misbehaviour::Hang, 7))
        .send()
        .await;
    assert!(hung.is_err_and(|error| error.is_timeout()));
    let seen = sink.seen();
    assert_eq!((seen.neighbour_requests, seen.neighbour_answered), (4, 1));
    assert_eq!(
        (seen.requests, seen.distinct),
        (0, 0),
        "no delivery counted"
    );
}
