//! Registry outage: the dispatchers reach the registry through a fault proxy, which is down
//! (connections refused) for 20 s, then answers 503/504 itself for 20 s, then forwards
//! again (10 s each in the short run). Events are Avro through the registry: half of the
//! healthy endpoint's events are written with a schema new in each phase, whose id no
//! dispatcher knows yet (they must wait the outage out, not be taken for malformed), the
//! others with the schema every dispatcher has cached; a tenth go to an endpoint that
//! answers 400, so that DLQ envelopes are written during the outage (not 410, which would
//! disable the endpoint after its first answer: issue 11's endpoint lifecycle).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hookline_core::envelope::ErrorReason;
use serde_json::json;

use super::{Env, Scenario};
use crate::fixture::PARTITIONS;
use crate::load::{AvroSchema, Body, Expect, Load, Outgoing, event, schema_variant};
use crate::proxy::{FaultProxy, ProxyMode};
use crate::receiver::always;
use crate::report::ScenarioReport;

/// The scenario's name.
pub const NAME: &str = "registry-outage";
const TITLE: &str = "the registry refused, then 503/504, then back, behind a fault proxy";

/// Runs it.
pub async fn run(env: &Env) -> anyhow::Result<ScenarioReport> {
    let (phase_s, warm_s, rate): (u64, u64, f64) = env.pick((10, 8, 50.0), (20, 10, 100.0));
    let total_s = warm_s + 2 * phase_s + warm_s;
    let events = (rate * total_s as f64) as u64;
    let mut s = Scenario::new(env, NAME, TITLE).await?;
    let proxy = FaultProxy::start(&env.registry_url).await?;
    s.replicas.settings.registry_url = proxy.url_for(&env.registry_url)?;
    s.settings = json!({
        "events": events, "rate_per_s": rate, "replicas": 2, "refused_s": phase_s,
        "unavailable_s": phase_s, "encoding": "avro",
        "endpoints": "ok 90% (204; half of it with a schema new in each phase), gone 10% (400)",
    });
    s.endpoint("ok", always(204), true).await?;
    s.endpoint("gone", always(400), false).await?;
    s.start_replicas(2).await?;

    let mut schemas = vec![AvroSchema {
        schema: Arc::from(hookline_core::schema::WEBHOOK_EVENT_CURRENT),
        subject_suffix: None,
    }];
    for phase in 1..=3 {
        let field = format!("chaos_phase_{phase}");
        schemas.push(AvroSchema {
            schema: Arc::from(schema_variant(&field)?),
            subject_suffix: Some(Arc::from(field)),
        });
    }
    let phase = Arc::new(AtomicUsize::new(0));
    let run = s.run.clone();
    let current = Arc::clone(&phase);
    let load = s.load(
        Load {
            total: events,
            rate_per_s: rate,
        },
        move |n| {
            // Every partition gets all kinds, so a partition whose records wait for the
            // registry shows whether they hold up the others behind them.
            let round = n / PARTITIONS as u64;
            let (endpoint, expect) = if round.is_multiple_of(10) {
                ("gone", Expect::Park(ErrorReason::NonRetryableStatus))
            } else {
                ("ok", Expect::Deliver)
            };
            let schema = if endpoint == "ok" && !round.is_multiple_of(2) {
                &schemas[current.load(Ordering::Relaxed)]
            } else {
                &schemas[0]
            };
            Outgoing {
                event: event(&run, endpoint, n),
                body: Body::Avro(schema.clone()),
                expect,
            }
        },
    );
    tokio::time::sleep(Duration::from_secs(warm_s)).await;
    let mut outage = (0.0, 0.0);
    for (next, mode, what) in [
        (1, ProxyMode::Refuse, "registry proxy: refusing connections"),
        (
            2,
            ProxyMode::Unavailable,
            "registry proxy: answering 503/504",
        ),
        (3, ProxyMode::Forward, "registry proxy: forwarding again"),
    ] {
        proxy.set(mode);
        phase.store(next, Ordering::Relaxed);
        let at = s.timeline.note(what);
        match mode {
            ProxyMode::Refuse => outage.0 = at,
            ProxyMode::Forward => outage.1 = at,
            ProxyMode::Unavailable => {}
        }
        if mode != ProxyMode::Forward {
            tokio::time::sleep(Duration::from_secs(phase_s)).await;
        }
    }
    s.published(load).await?;
    s.settle(Duration::from_secs(120)).await;
    s.notes.push(format!(
        "the proxy answered {} registry requests 503/504 itself",
        proxy.answered()
    ));
    let parked_meanwhile = s
        .parked()
        .iter()
        .filter(|p| p.at >= outage.0 && p.at < outage.1)
        .count();
    s.notes.push(format!(
        "{parked_meanwhile} DLQ envelopes were written while the registry was unreachable"
    ));
    Ok(s.finish(0).await)
}
