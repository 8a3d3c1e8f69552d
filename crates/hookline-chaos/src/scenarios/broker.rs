//! Broker restart: the local stack's broker is stopped, stays down 20 s (10 s in the short
//! run) and is started again (`deploy/local/stack restart kafka --down-for N`), mid-run. A
//! healthy endpoint and one that answers 503 to a fifth of first attempts (so retry copies
//! are written while the broker is away, and its circuit breaker stays closed) receive a
//! steady load; the publisher waits the outage out.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::json;

use super::{Env, Scenario, chance, pick};
use crate::load::{Body, Expect, Load, Outgoing, event};
use crate::receiver::{Answer, Ask, always};
use crate::report::ScenarioReport;

/// The scenario's name.
pub const NAME: &str = "broker-restart";
const TITLE: &str = "the broker stopped, down for a while, started again, mid-run";

/// Runs it.
pub async fn run(env: &Env) -> anyhow::Result<ScenarioReport> {
    let (events, rate, down_s, after_s): (u64, f64, u64, u64) =
        env.pick((3_000, 100.0, 10, 8), (20_000, 300.0, 20, 10));
    let mut s = Scenario::new(env, NAME, TITLE).await?;
    s.settings = json!({
        "events": events, "rate_per_s": rate, "replicas": 3, "down_for_s": down_s,
        "restart_after_s": after_s, "endpoints": "ok 90% (204), flaky 10% (503 to a fifth of first attempts)",
    });
    s.endpoint("ok", always(204), true).await?;
    let flaky = Arc::new(|ask: &Ask<'_>| {
        if ask.attempt == 1 && chance(ask.id, 1, 20) {
            Answer::Status(503)
        } else {
            Answer::Status(204)
        }
    });
    s.endpoint("flaky", flaky, false).await?;
    s.start_replicas(3).await?;

    let run = s.run.clone();
    let load = s.load(
        Load {
            total: events,
            rate_per_s: rate,
        },
        move |n| {
            let endpoint = pick(&[("ok", 9), ("flaky", 1)], n);
            Outgoing {
                event: event(&run, endpoint, n),
                body: Body::Json,
                expect: Expect::Deliver,
            }
        },
    );
    tokio::time::sleep(Duration::from_secs(after_s)).await;
    s.timeline
        .note(format!("stack restart kafka --down-for {down_s}"));
    let status = tokio::process::Command::new(&env.stack)
        .args(["restart", "kafka", "--down-for", &down_s.to_string()])
        .env("HOOKLINE_STACK_QUIET", "1")
        .status()
        .await
        .context("running deploy/local/stack")?;
    if !status.success() {
        bail!("deploy/local/stack restart kafka failed ({status})");
    }
    s.timeline.note("the broker is back");
    s.published(load).await?;
    s.settle(Duration::from_secs(180)).await;
    // Every partition may have moved when the coordinator came back.
    Ok(s.finish(6).await)
}
