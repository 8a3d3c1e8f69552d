//! Scenario 8, fan-out: tenant events, each delivered to every endpoint of the tenant;
//! compared with the pipeline per delivery.

use anyhow::Context as _;

use super::ScenarioCtx;
use crate::contest;
use crate::fixture::{FanoutFixture, RETRY_TIER, run_name, run_topics};
use crate::results::ScenarioResult;

/// Runs it once.
pub async fn run(ctx: &ScenarioCtx<'_>) -> anyhow::Result<ScenarioResult> {
    let sizes = &ctx.sizes;
    let name = run_name(&ctx.base, "fanout", 1);
    let topics = run_topics(&name);
    let mut config = ctx.hookline_config("fanout", &topics, &[RETRY_TIER.to_owned()])?;
    config.per_endpoint = sizes.concurrency;
    config.fanout_topic = Some(topics.fanout());
    let fanout = FanoutFixture::create(
        &ctx.kafka,
        &name,
        &ctx.sink.url(),
        sizes.fanout_events,
        sizes.fanout_endpoints,
        sizes.payload_bytes,
    )
    .await
    .context("the fan-out fixture")?;
    let measured = async {
        let command = ctx.hookline_command("fanout", &config)?;
        contest::drain(
            ctx,
            "fanout",
            command,
            fanout.deliveries(),
            &fanout.id_prefix(),
            Some(config.admin_port),
        )
        .await
    }
    .await;
    ctx.cleanup(&fanout.created, &[config.group.clone()]).await;
    Ok(ScenarioResult::of(
        "fanout",
        format!(
            "{} tenant events x {} endpoints of one tenant",
            sizes.fanout_events, sizes.fanout_endpoints
        ),
        vec![measured?],
    ))
}
