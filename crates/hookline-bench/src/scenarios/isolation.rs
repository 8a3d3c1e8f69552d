//! Scenario 6, isolation: one event in ten to an endpoint that never answers (hookline's
//! timeout `isolation_timeout_ms`), nine in ten spread over fast endpoints; the run ends
//! when every healthy delivery has arrived. Its figures are the healthy deliveries'.
//! It runs in every round, after the pipeline it is compared with, so that both are
//! medians of rounds taken on the same machine at the same time.

use super::{Progress, ScenarioCtx};
use crate::contest::{self, Measured};
use crate::fixture::{Fixture, RETRY_TIER, event, payload, run_name, run_topics};
use crate::report::Spread;
use crate::results::ScenarioResult;
use crate::sizes::Sizes;

const DEAD: &str = "dead";

/// One round: the healthy deliveries' figures, and the requests the dead endpoint got.
pub struct Round {
    measured: Measured,
    dead_requests: u64,
}

/// Runs round `round`.
pub async fn measure(ctx: &ScenarioCtx<'_>, round: u32) -> anyhow::Result<Round> {
    let sizes = &ctx.sizes;
    let healthy = sizes.isolation_healthy_endpoints.max(1);
    let events = sizes.events;
    let name = run_name(&ctx.base, "isolation", round);
    let mut config =
        ctx.hookline_config("isolation", &run_topics(&name), &[RETRY_TIER.to_owned()])?;
    config.per_endpoint = sizes.concurrency;
    config.timeout_ms = Some(sizes.isolation_timeout_ms);
    let healthy_deliveries = (0..events)
        .filter(|n| endpoint_of(*n, healthy).is_some())
        .count() as u64;
    let fixture = Fixture::create(&ctx.kafka, &name, &[RETRY_TIER]).await?;
    let measured = async {
        let url = ctx.sink.url();
        let mut endpoints: Vec<(String, String)> = (0..healthy)
            .map(|i| (format!("ok-{i}"), format!("{url}?ep={i}")))
            .collect();
        endpoints.push((DEAD.to_owned(), ctx.sink.route_url("dead")));
        fixture.register(&ctx.kafka, endpoints).await?;
        let body = payload(sizes.payload_bytes);
        fixture
            .publish(&ctx.kafka, events, |n| {
                let endpoint =
                    endpoint_of(n, healthy).map_or_else(|| DEAD.to_owned(), |i| format!("ok-{i}"));
                event(&name, n, &endpoint, body.clone())
            })
            .await?;
        let command = ctx.hookline_command("isolation", &config)?;
        contest::drain(
            ctx,
            "isolation",
            command,
            healthy_deliveries,
            &fixture.id_prefix(),
            Some(config.admin_port),
        )
        .await
    }
    .await;
    ctx.cleanup(&fixture.created, &[config.group.clone()]).await;
    let measured = measured?;
    let dead_requests = measured.requests.saturating_sub(healthy_deliveries);
    Ok(Round {
        measured,
        dead_requests,
    })
}

/// The scenario's result over its rounds (medians); `None` when it did not run.
pub fn result(sizes: &Sizes, rounds: Vec<Round>) -> Option<ScenarioResult> {
    let dead_requests = Spread::of(rounds.iter().map(|round| round.dead_requests as f64));
    let runs: Vec<Measured> = rounds.into_iter().map(|round| round.measured).collect();
    if runs.is_empty() {
        return None;
    }
    let mut result = ScenarioResult::of(
        "isolation",
        format!(
            "{} events: 10% to a dead endpoint ({} ms timeout), 90% to {} fast ones; healthy figures",
            sizes.events,
            sizes.isolation_timeout_ms,
            sizes.isolation_healthy_endpoints.max(1)
        ),
        runs,
    );
    result.note("dead_requests", dead_requests.median);
    Some(result)
}

impl Progress for Round {
    fn progress(&self) -> String {
        format!(
            "{} ({} requests to the dead endpoint)",
            self.measured.progress(),
            self.dead_requests
        )
    }
}

/// Event `n`'s healthy endpoint, or `None` for the dead one (one in ten).
fn endpoint_of(n: u64, healthy: u64) -> Option<u64> {
    (!n.is_multiple_of(10)).then(|| n % healthy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_in_ten_goes_to_the_dead_endpoint() {
        let dead = (0..1000).filter(|n| endpoint_of(*n, 9).is_none()).count();
        assert_eq!(dead, 100);
        let mut used: Vec<u64> = (0..1000).filter_map(|n| endpoint_of(n, 9)).collect();
        used.sort_unstable();
        used.dedup();
        assert_eq!(used, (0..9).collect::<Vec<_>>());
    }

    #[test]
    fn its_result_is_the_median_of_its_rounds() {
        let sizes = Sizes::new(false, None, None);
        let round = |deliveries_per_s: f64, dead_requests| {
            let mut measured = crate::results::tests::measured(18_000, 2.0, 1.0, 60.0, 1_000.0);
            measured.deliveries_per_s = deliveries_per_s;
            Round {
                measured,
                dead_requests,
            }
        };
        let rounds = vec![round(6_000.0, 34), round(9_000.0, 35), round(9_500.0, 36)];
        let result = result(&sizes, rounds).expect("three rounds");
        assert_eq!(result.scenario, "isolation");
        assert_eq!(result.runs.len(), 3);
        assert_eq!(result.deliveries_per_s, 9_000.0);
        assert_eq!(result.notes.get("dead_requests"), Some(&35.0));
        assert!(super::result(&sizes, Vec::new()).is_none());
    }
}
