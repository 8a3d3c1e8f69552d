//! Scenario 10, neighbours: a healthy endpoint's events beside misbehaving endpoints' on
//! the same partitions, at hookline's default settings. For each kind of misbehaviour
//! ([`Misbehaviour`]: slow, hanging, failing, throttling) and each count of misbehaving
//! endpoints, the run delivers a first healthy event (hookline knows the healthy endpoint),
//! then publishes a backlog of the misbehaving endpoints' events and waits until hookline has
//! taken it in (its offsets committed), then a steady stream in which one event in three is a
//! misbehaving endpoint's and the others the healthy one's.
//! Its figures are the healthy endpoint's over the stream (deliveries per second, publish to
//! 2xx), set against the healthy endpoint alone, run first: the same healthy events at the
//! same rate (the stream at two thirds of its rate, every event the healthy one's). The
//! misbehaving endpoints' requests say how far they progressed meanwhile.

use std::time::Duration;

use hookline_core::policy::RetryTiers;

use super::{Progress, ScenarioCtx};
use crate::contest::{self, Measured};
use crate::fixture::{
    Fixture, event, payload, publish_paced, run_name, run_topics, stream_publisher, taken_in,
};
use crate::results::ScenarioResult;
use crate::sink::Misbehaviour;

const HEALTHY: &str = "healthy";

/// One point of the sweep: the healthy endpoint's figures and its neighbours' progress.
pub struct Point {
    /// `alone`, or the kind and count of the misbehaving endpoints.
    pub name: String,
    measured: Measured,
    neighbour_requests: u64,
    neighbour_answered: u64,
}

impl Progress for Point {
    fn progress(&self) -> String {
        format!(
            "{}: {} ({} neighbour requests)",
            self.name,
            self.measured.progress(),
            self.neighbour_requests
        )
    }
}

/// The misbehaving endpoint of event `n`, one in three, when there are `count` of them.
fn neighbour_of(n: u64, count: u64) -> Option<u64> {
    (count > 0 && n.is_multiple_of(3)).then(|| (n / 3) % count)
}

/// Runs one point: `count` endpoints misbehaving as `kind` (none: the healthy one alone).
pub async fn measure(
    ctx: &ScenarioCtx<'_>,
    kind: Misbehaviour,
    count: u64,
) -> anyhow::Result<Point> {
    let sizes = &ctx.sizes;
    let point = if count == 0 {
        "alone".to_owned()
    } else {
        format!("{}-{count}", kind.name())
    };
    let name = run_name(&ctx.base, &format!("neighbours-{point}"), 1);
    // hookline's own tiers, as a deployment that sets none has them.
    let tiers = RetryTiers::DEFAULT_SUFFIXES;
    let config =
        ctx.hookline_config("neighbours", &run_topics(&name), &tiers.map(str::to_owned))?;
    let fixture = Fixture::create(&ctx.kafka, &name, &tiers).await?;
    let measured = async {
        let mut endpoints = vec![(HEALTHY.to_owned(), ctx.sink.url())];
        endpoints.extend((0..count).map(|i| (format!("nb-{i}"), ctx.sink.neighbour_url(kind, i))));
        fixture.register(&ctx.kafka, endpoints).await?;
        let body = payload(sizes.payload_bytes);
        let backlog = if count == 0 {
            0
        } else {
            sizes.neighbours_backlog
        };
        // Event 0 is the healthy one's warm-up; 1..=backlog the neighbours' backlog (every
        // event to a neighbour); the stream follows, one in three to a neighbour.
        let make = |n: u64| {
            let endpoint = match n {
                0 => HEALTHY.to_owned(),
                n if n <= backlog => format!("nb-{}", (n - 1) % count.max(1)),
                n => {
                    neighbour_of(n, count).map_or_else(|| HEALTHY.to_owned(), |i| format!("nb-{i}"))
                }
            };
            event(&name, n, &endpoint, body.clone())
        };
        // The healthy endpoint is a customer hookline knows: its warm-up event is delivered
        // before the neighbours, new to it, start misbehaving.
        let publisher = stream_publisher(&ctx.kafka, &fixture.topics.events, &make(0)).await?;
        // Each point's config and log files are its own.
        let run = format!("neighbours-{point}");
        let command = ctx.hookline_command(&run, &config)?;
        let mut launched = contest::launch(
            ctx,
            &run,
            command,
            1,
            &fixture.id_prefix(),
            Some(config.admin_port),
        )?;
        launched.wait_for(ctx.sink, 1, ctx.run_timeout).await?;
        fixture
            .publish(&ctx.kafka, backlog, |n| make(n + 1))
            .await?;
        // The stream measures the steady state beside a backlog that hookline has taken in
        // (moved aside), not the moment the backlog lands in front of it on the partitions.
        taken_in(
            &ctx.kafka,
            &config.group,
            &fixture.topics.events,
            ctx.run_timeout,
        )
        .await?;
        let first = 1 + backlog;
        let seconds = sizes.neighbours_seconds;
        // Alone, only the healthy two thirds of the stream are published.
        let rate = if count == 0 {
            sizes.neighbours_rate_per_s * 2 / 3
        } else {
            sizes.neighbours_rate_per_s
        };
        // The sink's target is set before the stream: the healthy events it will hold.
        let planned = rate.saturating_mul(seconds);
        let healthy_of = |sent: u64| {
            (first..first + sent)
                .filter(|n| neighbour_of(*n, count).is_none())
                .count() as u64
        };
        launched.restart(ctx.sink, healthy_of(planned), &fixture.id_prefix())?;
        let (sent, _kept) =
            publish_paced(&publisher, rate, Duration::from_secs(seconds), first, make).await?;
        launched
            .wait_for(ctx.sink, healthy_of(sent), ctx.run_timeout)
            .await?;
        let seen = ctx.sink.seen();
        let measured = launched.finish(ctx.sink).await?;
        anyhow::Ok((measured, seen))
    }
    .await;
    ctx.cleanup(&fixture.created, std::slice::from_ref(&config.group))
        .await;
    let (measured, seen) = measured?;
    Ok(Point {
        name: point,
        measured,
        neighbour_requests: seen.neighbour_requests,
        neighbour_answered: seen.neighbour_answered,
    })
}

/// The sweep's results: the healthy endpoint alone first, then each point with its p99's
/// ratio to it (`p99_vs_alone`; the throughput's is its `throughput_ratio`, as every
/// scenario's against its baseline) and its neighbours' progress.
pub fn results(points: Vec<Point>) -> Vec<ScenarioResult> {
    let alone = points
        .iter()
        .find(|point| point.name == "alone")
        .map(|point| point.measured.latency.p99_ms);
    points
        .into_iter()
        .map(|point| {
            let p99_ms_of = point.measured.latency.p99_ms;
            let mut result = ScenarioResult::of(
                &format!("neighbours-{}", point.name),
                format!(
                    "a healthy endpoint's stream beside {}; its figures",
                    if point.name == "alone" {
                        "no misbehaving endpoint".to_owned()
                    } else {
                        format!("misbehaving endpoints ({})", point.name)
                    }
                ),
                vec![point.measured],
            );
            if let Some(p99_ms) = alone {
                result.note("p99_vs_alone", p99_ms_of / p99_ms);
            }
            result.note("neighbour_requests", point.neighbour_requests as f64);
            result.note("neighbour_answered", point.neighbour_answered as f64);
            result
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_event_in_three_goes_to_a_neighbour_round_robin() {
        assert_eq!(neighbour_of(3, 0), None, "no neighbours: all healthy");
        let neighbours: Vec<u64> = (0..30).filter_map(|n| neighbour_of(n, 4)).collect();
        assert_eq!(neighbours, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]);
        assert_eq!(
            (0..300).filter(|n| neighbour_of(*n, 20).is_none()).count(),
            200
        );
    }

    #[test]
    fn each_point_is_set_against_the_healthy_endpoint_alone() {
        let point = |name: &str, deliveries_per_s: f64, p99_ms: f64| {
            let mut measured = crate::results::tests::measured(1_000, 1.0, 1.0, 50.0, 1_000.0);
            measured.deliveries_per_s = deliveries_per_s;
            measured.latency.p99_ms = p99_ms;
            Point {
                name: name.to_owned(),
                measured,
                neighbour_requests: 7,
                neighbour_answered: 3,
            }
        };
        let results = results(vec![
            point("alone", 1_000.0, 20.0),
            point("slow-20", 900.0, 40.0),
        ]);
        assert_eq!(results[0].scenario, "neighbours-alone");
        assert_eq!(results[1].scenario, "neighbours-slow-20");
        assert_eq!(results[1].notes.get("p99_vs_alone"), Some(&2.0));
        assert_eq!(results[1].notes.get("neighbour_requests"), Some(&7.0));
        assert_eq!(results[0].notes.get("p99_vs_alone"), Some(&1.0));
    }
}
