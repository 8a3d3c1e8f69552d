//! Scenarios 2 and 3: the minimal forwarder and hookline on one fast endpoint, each round
//! on a backlog of its own.

use anyhow::Context as _;

use super::ScenarioCtx;
use crate::contest::{self, Measured};
use crate::fixture::{Fixture, RETRY_TIER, run_name, run_topics};
use crate::run::baseline_command;

/// One round of the forwarder.
pub async fn forwarder(ctx: &ScenarioCtx<'_>, round: u32) -> anyhow::Result<Measured> {
    let name = run_name(&ctx.base, "forwarder", round);
    let group = format!("{name}-forwarder");
    let command = baseline_command(ctx, &name, &group, ctx.sizes.concurrency)?;
    let fixture = backlog(ctx, &name).await?;
    let measured = contest::drain(
        ctx,
        &format!("forwarder-{round}"),
        command,
        ctx.sizes.events,
        &fixture.id_prefix(),
        None,
    )
    .await;
    ctx.cleanup(&fixture.created, &[group]).await;
    measured
}

/// One round of hookline on one endpoint.
pub async fn pipeline(ctx: &ScenarioCtx<'_>, round: u32) -> anyhow::Result<Measured> {
    let name = run_name(&ctx.base, "pipeline", round);
    let run = format!("pipeline-{round}");
    let mut config =
        ctx.hookline_config("pipeline", &run_topics(&name), &[RETRY_TIER.to_owned()])?;
    config.per_endpoint = ctx.sizes.concurrency;
    let command = ctx.hookline_command(&run, &config)?;
    let fixture = backlog(ctx, &name).await?;
    let measured = contest::drain(
        ctx,
        &run,
        command,
        ctx.sizes.events,
        &fixture.id_prefix(),
        Some(config.admin_port),
    )
    .await;
    ctx.cleanup(&fixture.created, &[config.group]).await;
    measured
}

async fn backlog(ctx: &ScenarioCtx<'_>, name: &str) -> anyhow::Result<Fixture> {
    Fixture::direct(
        &ctx.kafka,
        name,
        &ctx.sink.url(),
        ctx.sizes.events,
        ctx.sizes.payload_bytes,
    )
    .await
    .with_context(|| format!("the backlog of {name}"))
}
