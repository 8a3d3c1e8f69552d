//! Scenario 7, retry timing: every event fails once (`/flaky` answers 503 to its first
//! attempt), at a light steady load, half of them on an endpoint retrying after 1 s and
//! half after 5 s (tiers `1s` and `5s`, fixed delays, the breaker off). Each retry's
//! lateness is its arrival less its due time (the failed attempt plus the delay). Then a
//! burst to the 5 s endpoint, and the dispatcher's CPU over a quiet window in which only
//! those delayed records wait.

use std::time::{Duration, Instant};

use anyhow::bail;
use hookline_core::EndpointConfig;
use hookline_core::policy::{PolicyOverride, StrategyKind};
use hookline_core::signing::SigningSecret;

use super::ScenarioCtx;
use crate::contest::{self, note};
use crate::fixture::{
    Fixture, event, payload, publish_backlog, publish_paced, run_name, run_topics, stream_publisher,
};
use crate::results::ScenarioResult;

/// The tiers, and the delays of the two endpoints.
const TIERS: [&str; 2] = ["1s", "5s"];
const DELAYS_MS: [u64; 2] = [1_000, 5_000];
const WARM: &str = "warm";

/// Runs it once.
pub async fn run(ctx: &ScenarioCtx<'_>) -> anyhow::Result<ScenarioResult> {
    let sizes = &ctx.sizes;
    let (rate, seconds) = (sizes.retry_rate_per_s, sizes.retry_seconds);
    let name = run_name(&ctx.base, "retry", 1);
    let tiers: Vec<String> = TIERS.iter().map(|tier| (*tier).to_owned()).collect();
    let mut config = ctx.hookline_config("retry", &run_topics(&name), &tiers)?;
    config.per_endpoint = sizes.concurrency;
    config.fixed_retry_ms = Some(DELAYS_MS[0]);
    config.breaker_off = true;
    let fixture = Fixture::create(&ctx.kafka, &name, &TIERS).await?;
    let outcome = async {
        fixture.register_configs(&ctx.kafka, endpoints(ctx)).await?;
        let body = payload(sizes.payload_bytes);
        // Even events to the 1 s endpoint, odd ones to the 5 s one.
        let make = |n: u64| {
            event(
                &name,
                n,
                &flaky_id(DELAYS_MS[(n % 2) as usize]),
                body.clone(),
            )
        };
        let steady = rate * seconds;
        let burst = rate.max(1);
        let command = ctx.hookline_command("retry", &config)?;
        let mut launched = contest::launch(
            ctx,
            "retry",
            command,
            1,
            &fixture.id_prefix(),
            Some(config.admin_port),
        )?;
        // The warm-up event: the load starts once hookline delivers.
        let warm_up = event(&name, 0, WARM, body.clone());
        let publisher = stream_publisher(&ctx.kafka, &fixture.topics.events, &warm_up).await?;
        launched.wait_for(ctx.sink, 1, ctx.run_timeout).await?;
        launched.restart(ctx.sink, steady + burst, &fixture.id_prefix())?;
        let (sent, kept) =
            publish_paced(&publisher, rate, Duration::from_secs(seconds), 1, make).await?;
        launched.wait_for(ctx.sink, sent, ctx.run_timeout).await?;

        // The burst to the 5 s endpoint; once every first attempt failed, only delayed
        // records wait: sample the CPU over the window (shorter than the delay).
        let first = 1 + sent;
        publish_backlog(&ctx.kafka, &fixture.topics.events, burst, |n| {
            event(&name, first + n, &flaky_id(DELAYS_MS[1]), body.clone())
        })
        .await?;
        if !ctx
            .sink
            .wait_failed_first(sent + burst, ctx.run_timeout)
            .await
        {
            bail!("the burst's first attempts did not all arrive");
        }
        let window = Duration::from_millis(sizes.idle_window_ms);
        let (before, delivered) = (launched.sample()?.cpu_s, ctx.sink.seen().distinct);
        let started = Instant::now();
        tokio::time::sleep(window).await;
        let idle_cpu_s = launched.sample()?.cpu_s - before;
        let idle_window_s = started.elapsed().as_secs_f64();
        if ctx.sink.seen().distinct != delivered {
            note("retry: a delivery arrived in the idle window (it was not quiet)");
        }
        launched
            .wait_for(ctx.sink, sent + burst, ctx.run_timeout)
            .await?;
        let measured = launched.finish(ctx.sink).await?;
        anyhow::Ok((measured, kept, idle_cpu_s / idle_window_s * 100.0))
    }
    .await;
    ctx.cleanup(&fixture.created, &[config.group.clone()]).await;
    let (measured, kept, idle_percent) = outcome?;
    let mut result = ScenarioResult::of(
        "retry",
        format!(
            "{rate} events/s for {seconds} s, each failing once; retries after 1 s and 5 s (tiers 1s, 5s)"
        ),
        vec![measured],
    );
    result.note("rate_kept_per_s", kept);
    result.note("idle_cpu_percent", idle_percent);
    Ok(result)
}

/// The warm-up endpoint and the two flaky ones, each retrying after its fixed delay.
fn endpoints(ctx: &ScenarioCtx<'_>) -> Vec<(String, EndpointConfig)> {
    let secret = || vec![SigningSecret::generate(&mut rand::rng()).to_whsec()];
    let mut endpoints = vec![(
        WARM.to_owned(),
        EndpointConfig::new(ctx.sink.url(), secret()),
    )];
    for delay in DELAYS_MS {
        let url = format!("{}?delay_ms={delay}", ctx.sink.route_url("flaky"));
        let config = EndpointConfig {
            retry: Some(PolicyOverride {
                strategy: Some(StrategyKind::Fixed),
                base_ms: Some(delay),
                cap_ms: Some(delay),
                ..PolicyOverride::default()
            }),
            ..EndpointConfig::new(url, secret())
        };
        endpoints.push((flaky_id(delay), config));
    }
    endpoints
}

fn flaky_id(delay_ms: u64) -> String {
    format!("flaky-{delay_ms}ms")
}
