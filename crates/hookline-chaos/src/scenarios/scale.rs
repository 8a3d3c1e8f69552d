//! Scale up and down: one replica, then three (two join), then one again (two stopped with
//! SIGTERM), while a steady load flows.

use std::time::Duration;

use serde_json::json;

use super::{Env, Scenario};
use crate::receiver::always;
use crate::report::ScenarioReport;

/// The scenario's name.
pub const NAME: &str = "scale-up-down";
const TITLE: &str = "1 replica, then 3, then 1 again, during a run";

/// Runs it.
pub async fn run(env: &Env) -> anyhow::Result<ScenarioReport> {
    let (events, rate): (u64, f64) = env.pick((3_000, 100.0), (30_000, 500.0));
    let quarter = Duration::from_secs_f64(events as f64 / rate / 4.0);
    let mut s = Scenario::new(env, NAME, TITLE).await?;
    s.settings = json!({ "events": events, "rate_per_s": rate, "replicas": "1 -> 3 -> 1" });
    s.endpoint("ok", always(204), true).await?;
    s.start_replicas(1).await?;

    let load = s.steady_load(events, rate);
    tokio::time::sleep(quarter).await;
    s.timeline.note("scale 1 -> 3");
    for slot in 1..3 {
        s.replicas.start(slot)?;
    }
    for slot in 1..3 {
        if !s.replicas.wait_ready(slot, Duration::from_secs(30)).await {
            s.notes.push(format!(
                "slot {slot} was not ready within 30 s of its start"
            ));
        }
    }
    tokio::time::sleep(quarter).await;
    s.timeline.note("scale 3 -> 1");
    for slot in (1..3).rev() {
        s.replicas.stop(slot).await?;
    }
    s.published(load).await?;
    s.settle(Duration::from_secs(120)).await;
    // The two that joined took two partitions each.
    Ok(s.finish(4).await)
}
