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
//!
//! The sweep runs in rounds, each with the healthy endpoint alone and every point, the order
//! reversed every other round; a point's ratios are the median over the rounds of its figure
//! over the same round's alone, with their range, so that one pause of the stack in one run
//! neither makes nor breaks a point.

use std::time::Duration;

use hookline_core::policy::RetryTiers;

use super::{Progress, ScenarioCtx, logged};
use crate::contest::{self, Measured};
use crate::fixture::{
    Fixture, event, payload, publish_paced, run_name, run_topics, stream_publisher, taken_in,
};
use crate::report::Spread;
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

/// Runs the sweep: `neighbours_rounds` rounds of the healthy endpoint alone and every point.
pub async fn sweep(ctx: &ScenarioCtx<'_>) -> anyhow::Result<Vec<ScenarioResult>> {
    let mut rounds = Vec::new();
    for round in 1..=ctx.sizes.neighbours_rounds {
        let mut order = vec![(Misbehaviour::Slow, 0)];
        order.extend(ctx.sizes.neighbours_points());
        // Every other round backwards, so that no point always runs next to alone.
        if round % 2 == 0 {
            order.reverse();
        }
        let mut points = Vec::new();
        for (kind, count) in order {
            let point = measure(ctx, kind, count).await;
            points.push(logged("neighbours", round, point)?);
        }
        rounds.push(points);
    }
    Ok(results(rounds))
}

/// The sweep's results, from its rounds: the healthy endpoint alone first, then each point
/// with the median over the rounds of its throughput and p99 over the same round's alone
/// (`thr_vs_alone`, `p99_vs_alone`), their ranges (`_min`, `_max`) and its neighbours'
/// progress (medians).
pub fn results(rounds: Vec<Vec<Point>>) -> Vec<ScenarioResult> {
    let mut names: Vec<String> = vec!["alone".to_owned()];
    for point in rounds.iter().flatten() {
        if !names.contains(&point.name) {
            names.push(point.name.clone());
        }
    }
    let alone: Vec<Option<&Measured>> = rounds
        .iter()
        .map(|round| {
            round
                .iter()
                .find(|point| point.name == "alone")
                .map(|point| &point.measured)
        })
        .collect();
    let mut out = Vec::new();
    for name in names {
        // This point's run in each round, beside that round's alone.
        let runs: Vec<(&Point, Option<&Measured>)> = rounds
            .iter()
            .zip(&alone)
            .filter_map(|(round, alone)| {
                let point = round.iter().find(|point| point.name == name)?;
                Some((point, *alone))
            })
            .collect();
        if runs.is_empty() {
            continue;
        }
        let mut result = ScenarioResult::of(
            &format!("neighbours-{name}"),
            format!(
                "a healthy endpoint's stream beside {}; its figures over {} rounds",
                if name == "alone" {
                    "no misbehaving endpoint".to_owned()
                } else {
                    format!("misbehaving endpoints ({name})")
                },
                runs.len()
            ),
            runs.iter()
                .map(|(point, _)| point.measured.clone())
                .collect(),
        );
        let mut ratios = |note: &str, figure: fn(&Measured) -> f64| {
            let of_rounds: Vec<f64> = runs
                .iter()
                .filter_map(|(point, alone)| Some(figure(&point.measured) / figure((*alone)?)))
                .collect();
            if !of_rounds.is_empty() {
                let spread = Spread::of(of_rounds.into_iter());
                result.note(note, spread.median);
                result.note(&format!("{note}_min"), spread.min);
                result.note(&format!("{note}_max"), spread.max);
            }
        };
        ratios("thr_vs_alone", |m| m.deliveries_per_s);
        ratios("p99_vs_alone", |m| m.latency.p99_ms);
        let progress = |figure: fn(&Point) -> u64| {
            Spread::of(runs.iter().map(|(point, _)| figure(point) as f64)).median
        };
        let requests = progress(|point| point.neighbour_requests);
        let answered = progress(|point| point.neighbour_answered);
        result.note("neighbour_requests", requests);
        result.note("neighbour_answered", answered);
        out.push(result);
    }
    out
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
    fn each_point_is_judged_by_the_median_of_its_rounds_against_the_same_rounds_alone() {
        let point = |name: &str, deliveries_per_s: f64, p99_ms: f64, requests: u64| {
            let mut measured = crate::results::tests::measured(1_000, 1.0, 1.0, 50.0, 1_000.0);
            measured.deliveries_per_s = deliveries_per_s;
            measured.latency.p99_ms = p99_ms;
            Point {
                name: name.to_owned(),
                measured,
                neighbour_requests: requests,
                neighbour_answered: requests / 2,
            }
        };
        // Round 2's alone is slow: its point, as slow, is 1.0x that round's alone, not 2x.
        let results = results(vec![
            vec![
                point("alone", 1_000.0, 10.0, 0),
                point("slow-20", 900.0, 12.0, 7),
            ],
            vec![
                point("slow-20", 1_000.0, 20.0, 9),
                point("alone", 1_000.0, 20.0, 0),
            ],
            vec![
                point("alone", 1_000.0, 10.0, 0),
                point("slow-20", 800.0, 40.0, 8),
            ],
        ]);
        assert_eq!(results[0].scenario, "neighbours-alone");
        assert_eq!(results[1].scenario, "neighbours-slow-20");
        let note = |name: &str| results[1].notes.get(name).copied();
        assert_eq!(note("p99_vs_alone"), Some(1.2));
        assert_eq!(note("p99_vs_alone_min"), Some(1.0));
        assert_eq!(note("p99_vs_alone_max"), Some(4.0));
        assert_eq!(note("thr_vs_alone"), Some(0.9));
        assert_eq!(note("thr_vs_alone_min"), Some(0.8));
        assert_eq!(note("neighbour_requests"), Some(8.0));
        assert_eq!(results[0].notes.get("p99_vs_alone"), Some(&1.0));
        assert_eq!(results[1].runs.len(), 3);
    }
}
