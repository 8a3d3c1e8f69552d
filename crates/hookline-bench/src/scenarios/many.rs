//! Scenario 4, many endpoints: `many_endpoints` endpoints at `/hook?ep=<i>`, `many_events_each`
//! events to each, interleaved (event n to endpoint n mod endpoints), the same total
//! concurrency as the pipeline (`max_in_flight` = the pipeline's per-endpoint limit).

use super::ScenarioCtx;
use crate::contest;
use crate::fixture::{Fixture, RETRY_TIER, event, payload, run_name, run_topics};
use crate::results::ScenarioResult;

/// Runs it once.
pub async fn run(ctx: &ScenarioCtx<'_>) -> anyhow::Result<ScenarioResult> {
    let sizes = &ctx.sizes;
    let (endpoints, each) = (sizes.many_endpoints, sizes.many_events_each);
    let name = run_name(&ctx.base, "many", 1);
    let mut config = ctx.hookline_config("many", &run_topics(&name), &[RETRY_TIER.to_owned()])?;
    config.per_endpoint = sizes.concurrency;
    config.max_in_flight = Some(sizes.concurrency as usize);
    let deliveries = endpoints * each;
    let fixture = Fixture::create(&ctx.kafka, &name, &[RETRY_TIER]).await?;
    let measured = async {
        let url = ctx.sink.url();
        fixture
            .register(
                &ctx.kafka,
                (0..endpoints)
                    .map(|i| (endpoint_id(i), format!("{url}?ep={i}")))
                    .collect(),
            )
            .await?;
        let body = payload(sizes.payload_bytes);
        fixture
            .publish(&ctx.kafka, deliveries, |n| {
                event(&name, n, &endpoint_id(n % endpoints), body.clone())
            })
            .await?;
        let command = ctx.hookline_command("many", &config)?;
        contest::drain(
            ctx,
            "many",
            command,
            deliveries,
            &fixture.id_prefix(),
            Some(config.admin_port),
        )
        .await
    }
    .await;
    ctx.cleanup(&fixture.created, &[config.group.clone()]).await;
    let mut result = ScenarioResult::of(
        "many",
        format!(
            "{endpoints} endpoints x {each} events, interleaved; max_in_flight {}",
            sizes.concurrency
        ),
        vec![measured?],
    );
    result.note("endpoints", endpoints as f64);
    Ok(result)
}

fn endpoint_id(i: u64) -> String {
    format!("ep-{i:05}")
}
