//! Rolling restart: three replicas, each in turn stopped with SIGTERM (it drains and must
//! exit 0), started again and waited for until it is ready, while a steady load flows.

use std::time::Duration;

use serde_json::json;

use super::{Env, Scenario};
use crate::receiver::always;
use crate::report::ScenarioReport;

/// The scenario's name.
pub const NAME: &str = "rolling-restart";
const TITLE: &str = "3 replicas; each in turn stopped with SIGTERM (exit 0) and started again";

/// Runs it.
pub async fn run(env: &Env) -> anyhow::Result<ScenarioReport> {
    let (events, rate, rounds): (u64, f64, usize) = env.pick((2_000, 100.0, 1), (30_000, 400.0, 2));
    let mut s = Scenario::new(env, NAME, TITLE).await?;
    s.settings = json!({ "events": events, "rate_per_s": rate, "replicas": 3, "rounds": rounds });
    s.endpoint("ok", always(204), true).await?;
    s.start_replicas(3).await?;

    let load = s.steady_load(events, rate);
    tokio::time::sleep(Duration::from_secs(5)).await;
    for _ in 0..rounds {
        for slot in 0..3 {
            s.replicas.stop(slot).await?;
            let name = s.replicas.start(slot)?;
            if !s.replicas.wait_ready(slot, Duration::from_secs(30)).await {
                s.notes
                    .push(format!("{name} was not ready within 30 s of its start"));
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
    s.published(load).await?;
    s.settle(Duration::from_secs(120)).await;
    // Each restarted replica joins and takes its share: two partitions.
    Ok(s.finish(rounds as u64 * 3 * 2).await)
}
