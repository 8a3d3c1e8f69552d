//! Scenario 9, latency under load: hookline on one fast endpoint while the benchmark
//! publishes a steady `latency_rate_per_s` for `latency_seconds`; publish to 2xx.

use std::time::Duration;

use super::ScenarioCtx;
use crate::contest;
use crate::fixture::{
    ENDPOINT_ID, Fixture, RETRY_TIER, event, payload, publish_paced, run_name, run_topics,
    stream_publisher,
};
use crate::results::ScenarioResult;

/// Runs it once.
pub async fn run(ctx: &ScenarioCtx<'_>) -> anyhow::Result<ScenarioResult> {
    let sizes = &ctx.sizes;
    let (rate, seconds) = (sizes.latency_rate_per_s, sizes.latency_seconds);
    let name = run_name(&ctx.base, "latency", 1);
    let mut config =
        ctx.hookline_config("latency", &run_topics(&name), &[RETRY_TIER.to_owned()])?;
    config.per_endpoint = sizes.concurrency;
    let fixture = Fixture::create(&ctx.kafka, &name, &[RETRY_TIER]).await?;
    let published = async {
        fixture
            .register(&ctx.kafka, vec![(ENDPOINT_ID.to_owned(), ctx.sink.url())])
            .await?;
        let body = payload(sizes.payload_bytes);
        let make = |n| event(&name, n, ENDPOINT_ID, body.clone());
        let total = rate * seconds;
        let command = ctx.hookline_command("latency", &config)?;
        // Event 0 warms up: the load starts once hookline has delivered it.
        let mut launched = contest::launch(
            ctx,
            "latency",
            command,
            1 + total,
            &fixture.id_prefix(),
            Some(config.admin_port),
        )?;
        let publisher = stream_publisher(&ctx.kafka, &fixture.topics.events, &make(0)).await?;
        launched.wait_for(ctx.sink, 1, ctx.run_timeout).await?;
        launched.restart(ctx.sink, total, &fixture.id_prefix())?;
        let (sent, kept) =
            publish_paced(&publisher, rate, Duration::from_secs(seconds), 1, make).await?;
        launched.wait_for(ctx.sink, sent, ctx.run_timeout).await?;
        let measured = launched.finish(ctx.sink).await?;
        anyhow::Ok((measured, kept))
    }
    .await;
    ctx.cleanup(&fixture.created, &[config.group.clone()]).await;
    let (measured, kept) = published?;
    let mut result = ScenarioResult::of(
        "latency",
        format!("a steady {rate} events/s for {seconds} s to 1 endpoint; publish to 2xx"),
        vec![measured],
    );
    result.note("rate_kept_per_s", kept);
    Ok(result)
}
