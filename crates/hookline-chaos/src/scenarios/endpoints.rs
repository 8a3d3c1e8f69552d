//! Endpoint faults: beside a healthy endpoint (whose longest stall is the figure to watch),
//! one flaps (down 10 s refusing connections, up 10 s, down 10 s answering 503, up 10 s),
//! one answers 503 to half of its requests, one hangs past the attempt timeout
//! (`http.timeout_ms = 2000`) on first attempts only, and one resets the connection on
//! first attempts. The flapping endpoint's retries wait for its circuit breaker (open
//! 30 s), not the backoff: they are left out of the lateness figure and shown on their own.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{Env, Scenario, chance, pick};
use crate::load::{Body, Expect, Load, Outgoing, event};
use crate::receiver::{Answer, Ask, Mode, always};
use crate::report::ScenarioReport;

/// The scenario's name.
pub const NAME: &str = "endpoint-faults";
const TITLE: &str = "flapping, 50% 503, hanging and resetting endpoints beside a healthy one";

const SHARES: [(&str, u64); 5] = [
    ("healthy", 4),
    ("flap", 2),
    ("half", 2),
    ("hang", 1),
    ("reset", 1),
];

/// Runs it.
pub async fn run(env: &Env) -> anyhow::Result<ScenarioReport> {
    let (cycles, rate): (u32, f64) = env.pick((1, 50.0), (2, 100.0));
    let flap_s = 10;
    // Up 5 s, then per cycle: refused 10 s, up 10 s, 503 10 s, up 10 s.
    let duration_s = 5 + u64::from(cycles) * 4 * flap_s;
    let events = (rate * duration_s as f64) as u64;
    let mut s = Scenario::new(env, NAME, TITLE).await?;
    s.settings = json!({
        "events": events, "rate_per_s": rate, "replicas": 3, "flap_cycles": cycles,
        "flap_s": flap_s, "http_timeout_ms": s.replicas.settings.timeout_ms,
        "shares": SHARES.iter().map(|(name, weight)| format!("{name} {}%", weight * 10)).collect::<Vec<_>>(),
    });
    s.endpoint("healthy", always(204), true).await?;
    let flap = s.endpoint("flap", always(204), false).await?;
    s.endpoints[flap].lateness = false;
    let half = Arc::new(|ask: &Ask<'_>| {
        if chance(ask.id, ask.attempt, 50) {
            Answer::Status(503)
        } else {
            Answer::Status(204)
        }
    });
    s.endpoint("half", half, false).await?;
    let first_hangs = Arc::new(|ask: &Ask<'_>| match ask.attempt {
        1 => Answer::Hang,
        _ => Answer::Status(204),
    });
    s.endpoint("hang", first_hangs, false).await?;
    let first_resets = Arc::new(|ask: &Ask<'_>| match ask.attempt {
        1 => Answer::Reset,
        _ => Answer::Status(204),
    });
    s.endpoint("reset", first_resets, false).await?;
    s.start_replicas(3).await?;

    let run = s.run.clone();
    let load = s.load(
        Load {
            total: events,
            rate_per_s: rate,
        },
        move |n| Outgoing {
            event: event(&run, pick(&SHARES, n), n),
            body: Body::Json,
            expect: Expect::Deliver,
        },
    );
    let step = Duration::from_secs(flap_s);
    tokio::time::sleep(Duration::from_secs(5)).await;
    for _ in 0..cycles {
        for (mode, what) in [
            (Mode::Refuse, "flap: refusing connections"),
            (Mode::Serve, "flap: up"),
            (Mode::Fail(503), "flap: answering 503"),
            (Mode::Serve, "flap: up"),
        ] {
            s.endpoints[flap].set_mode(mode);
            s.timeline.note(what);
            tokio::time::sleep(step).await;
        }
    }
    s.published(load).await?;
    s.settle(Duration::from_secs(180)).await;
    Ok(s.finish(0).await)
}
