//! kill -9: three replicas; every few seconds one of them (in turn) is killed with SIGKILL
//! and restarted at once, ten times, while a steady load flows to a healthy endpoint. The
//! dead member keeps its partitions until the group's session timeout (6 s) ends: the
//! report shows when they resumed and how the other partitions fared meanwhile.

use std::time::Duration;

use serde_json::json;

use super::{Env, Scenario};
use crate::receiver::always;
use crate::report::ScenarioReport;

/// The scenario's name.
pub const NAME: &str = "kill-9";
const TITLE: &str = "3 replicas; one killed (SIGKILL) and restarted at once, every few seconds";

/// Runs it.
pub async fn run(env: &Env) -> anyhow::Result<ScenarioReport> {
    let (events, kills, every_s): (u64, usize, f64) = env.pick((6_000, 5, 7.0), (100_000, 10, 8.0));
    // The load lasts until a little after the last kill.
    let rate = events as f64 / (every_s * (kills as f64 + 1.5));
    let mut s = Scenario::new(env, NAME, TITLE).await?;
    s.settings = json!({
        "events": events, "rate_per_s": rate.round(), "replicas": 3, "kills": kills,
        "every_s": every_s, "session_timeout_ms": s.replicas.settings.session_timeout_ms,
    });
    s.endpoint("ok", always(204), true).await?;
    s.start_replicas(3).await?;

    let load = s.steady_load(events, rate);
    for kill in 0..kills {
        tokio::time::sleep(Duration::from_secs_f64(every_s)).await;
        let slot = kill % 3;
        s.replicas.kill(slot).await?;
        s.replicas.start(slot)?;
    }
    s.published(load).await?;
    s.settle(Duration::from_secs(120)).await;
    // Each restarted replica joins the group and takes its share: two partitions.
    Ok(s.finish(kills as u64 * 2).await)
}
