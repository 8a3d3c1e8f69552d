//! Scenario 5, slow: one endpoint that answers after 100 ms; hookline allowed `limit`
//! attempts in flight (per endpoint and in all), its queues sized to keep that many busy.
//! The ceiling is `limit` / 100 ms.

use super::ScenarioCtx;
use crate::contest::{self, HOOKLINE_MAX_PENDING};
use crate::fixture::{ENDPOINT_ID, Fixture, RETRY_TIER, event, payload, run_name, run_topics};
use crate::results::ScenarioResult;
use crate::sink::SLOW_MS;

/// Runs it once with `limit` in flight.
pub async fn run(ctx: &ScenarioCtx<'_>, limit: u32) -> anyhow::Result<ScenarioResult> {
    let sizes = &ctx.sizes;
    let run = format!("slow-{limit}");
    let name = run_name(&ctx.base, &run, 1);
    let per_s = f64::from(limit) * 1000.0 / SLOW_MS as f64;
    let events = (per_s * sizes.slow_seconds as f64).ceil() as u64;
    let mut config = ctx.hookline_config(&run, &run_topics(&name), &[RETRY_TIER.to_owned()])?;
    let limit_usize = limit as usize;
    config.per_endpoint = limit;
    config.max_in_flight = Some(limit_usize);
    // The queue must stay below max_pending, and hold the limit with room to refill.
    config.max_pending = HOOKLINE_MAX_PENDING.max(limit_usize * 4);
    config.per_endpoint_queue = Some(limit_usize * 2);
    let fixture = Fixture::create(&ctx.kafka, &name, &[RETRY_TIER]).await?;
    let measured = async {
        fixture
            .register(
                &ctx.kafka,
                vec![(ENDPOINT_ID.to_owned(), ctx.sink.route_url("slow"))],
            )
            .await?;
        let body = payload(sizes.payload_bytes);
        fixture
            .publish(&ctx.kafka, events, |n| {
                event(&name, n, ENDPOINT_ID, body.clone())
            })
            .await?;
        let command = ctx.hookline_command(&run, &config)?;
        contest::drain(
            ctx,
            &run,
            command,
            events,
            &fixture.id_prefix(),
            Some(config.admin_port),
        )
        .await
    }
    .await;
    ctx.cleanup(&fixture.created, &[config.group.clone()]).await;
    let mut result = ScenarioResult::of(
        &run,
        format!("1 endpoint answering after {SLOW_MS} ms, {limit} in flight, {events} events"),
        vec![measured?],
    );
    result.note("in_flight", f64::from(limit));
    result.note("limit_per_s", per_s);
    result.note("share_of_limit", result.deliveries_per_s / per_s);
    Ok(result)
}
