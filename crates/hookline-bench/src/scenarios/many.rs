//! Scenario 4, many endpoints: `many_endpoints` endpoints at `/hook?ep=<i>`, `many_events_each`
//! events to each, interleaved (event n to endpoint n mod endpoints), the same total
//! concurrency as the pipeline (`max_in_flight` = the pipeline's per-endpoint limit).

use super::ScenarioCtx;
use crate::contest::{self, Measured};
use crate::fixture::{Fixture, RETRY_TIER, event, payload, run_name, run_topics};
use crate::results::ScenarioResult;
use crate::sizes::Sizes;

/// Runs it once, as round `round` (its topics are the round's own).
pub async fn measure(ctx: &ScenarioCtx<'_>, round: u32) -> anyhow::Result<Measured> {
    let sizes = &ctx.sizes;
    let (endpoints, each) = (sizes.many_endpoints, sizes.many_events_each);
    let name = run_name(&ctx.base, "many", round);
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
    measured
}

/// The scenario's result: the medians of its rounds; `None` when it did not run.
pub fn result(sizes: &Sizes, rounds: Vec<Measured>) -> Option<ScenarioResult> {
    if rounds.is_empty() {
        return None;
    }
    let (endpoints, each) = (sizes.many_endpoints, sizes.many_events_each);
    let mut result = ScenarioResult::of(
        "many",
        format!(
            "{endpoints} endpoints x {each} events, interleaved; max_in_flight {}",
            sizes.concurrency
        ),
        rounds,
    );
    result.note("endpoints", endpoints as f64);
    Some(result)
}

fn endpoint_id(i: u64) -> String {
    format!("ep-{i:05}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn its_result_is_the_median_of_its_rounds() {
        let sizes = Sizes::new(false, None, None);
        let round = |deliveries_per_s: f64| {
            let mut measured = crate::results::tests::measured(100_000, 2.0, 1.0, 86.0, 1_000.0);
            measured.deliveries_per_s = deliveries_per_s;
            measured
        };
        let rounds = vec![round(6_800.0), round(11_000.0), round(9_400.0)];
        let result = result(&sizes, rounds).expect("three rounds");
        assert_eq!(result.scenario, "many");
        assert_eq!(result.runs.len(), 3);
        assert_eq!(result.deliveries_per_s, 9_400.0);
        assert_eq!(result.notes.get("endpoints"), Some(&10_000.0));
        assert!(super::result(&sizes, Vec::new()).is_none());
    }
}
