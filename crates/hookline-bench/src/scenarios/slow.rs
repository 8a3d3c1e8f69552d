//! Scenario 5, slow: one endpoint that answers after 100 ms; hookline allowed `limit`
//! attempts in flight to it, its queues sized to keep that many busy. The ceiling is
//! `limit` / 100 ms.

use super::ScenarioCtx;
use crate::contest::{self, HOOKLINE_MAX_PENDING, HooklineConfig};
use crate::fixture::{ENDPOINT_ID, Fixture, RETRY_TIER, event, payload, run_name, run_topics};
use crate::report::Spread;
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
    allow_in_flight(&mut config, limit);
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
    // What the in-flight limit is about: the rate once delivering, start-up left out (a
    // second of start-up is a quarter of a 3 s backlog).
    let running = Spread::of(result.runs.iter().map(|run| run.after_first_per_s)).median;
    result.note("share_of_limit_running", running / per_s);
    Ok(result)
}

/// Lets the one endpoint have `limit` attempts in flight, with queues that keep it busy.
/// One endpoint holds at most a quarter of `max_in_flight`
/// ([`hookline_core::concurrency::endpoint_share`]): with `max_in_flight` = `limit`, as
/// before, it had `limit` / 4 and the scenario measured a quarter of what it said.
fn allow_in_flight(config: &mut HooklineConfig, limit: u32) {
    let limit_usize = limit as usize;
    config.per_endpoint = limit;
    config.max_in_flight = Some(limit_usize * hookline_core::concurrency::SHARE_DIVISOR);
    // The queue must stay below max_pending, and hold the limit with room to refill.
    config.max_pending = HOOKLINE_MAX_PENDING.max(limit_usize * 4);
    config.per_endpoint_queue = Some(limit_usize * 2);
}

#[cfg(test)]
mod tests {
    use hookline_core::concurrency::endpoint_share;
    use hookline_producer::Topics;

    use super::*;

    #[test]
    fn the_endpoint_may_have_the_whole_limit_in_flight() {
        for limit in [100, 500, 2_000] {
            let mut config = HooklineConfig::new(
                "g".into(),
                "127.0.0.1:9092",
                "http://127.0.0.1:8081",
                Topics::default(),
                &[RETRY_TIER.to_owned()],
                0,
            );
            allow_in_flight(&mut config, limit);
            let max_in_flight = config.max_in_flight.expect("set");
            let per_endpoint = config.per_endpoint.min(endpoint_share(max_in_flight));
            assert_eq!(per_endpoint, limit, "limit {limit}");
            let queue = config.per_endpoint_queue.expect("set");
            assert!(queue >= limit as usize && queue <= config.max_pending / 2);
        }
    }
}
