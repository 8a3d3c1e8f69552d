//! Which notices go out: the wanted types, never one about the operator endpoint's own
//! trouble (that would feed itself), one per (type, endpoint) and occurrence, and at most
//! `max_per_minute` overall (a token bucket). Decided at once, without waiting.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use super::notice::Notice;
use crate::config::NoticeType;
use crate::settings::OperatorWebhooksSettings;

/// Past this many remembered (type, endpoint) pairs, those older than a window are
/// forgotten.
const MAX_REMEMBERED: usize = 10_000;

/// What the gate says about a notice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Send it, with this event id.
    Send(String),
    /// A notice with the same id went out already.
    Deduplicated,
    /// Over `max_per_minute`.
    RateLimited,
    /// About the operator endpoint's own trouble: logged and counted only.
    AboutOperator,
    /// A type the config does not ask for.
    NotWanted,
}

impl Verdict {
    /// The metric's `outcome` label; `None`: not counted.
    pub fn outcome(&self) -> Option<&'static str> {
        match self {
            Verdict::Send(_) => None,
            Verdict::Deduplicated => Some("deduplicated"),
            Verdict::RateLimited => Some("rate_limited"),
            Verdict::AboutOperator => Some("about_operator"),
            Verdict::NotWanted => None,
        }
    }
}

/// The gate.
pub struct Gate<C: Clock = DefaultClock> {
    operator: String,
    events: BTreeSet<NoticeType>,
    window_ms: u64,
    /// The last occurrence sent per (type, endpoint), and when.
    sent: Mutex<HashMap<(NoticeType, String), (i64, i64)>>,
    bucket: RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<C::Instant>>,
}

impl Gate {
    /// A gate on the wall clock.
    pub fn new(settings: &OperatorWebhooksSettings) -> Self {
        Gate::with_clock(settings, DefaultClock::default())
    }
}

impl<C: Clock> Gate<C> {
    /// A gate on `clock` (tests use a fake one).
    pub fn with_clock(settings: &OperatorWebhooksSettings, clock: C) -> Self {
        Gate {
            operator: settings.endpoint_id.clone(),
            events: settings.events.clone(),
            window_ms: u64::try_from(settings.min_interval.as_millis()).unwrap_or(u64::MAX),
            sent: Mutex::default(),
            bucket: RateLimiter::direct_with_clock(
                Quota::per_minute(settings.max_per_minute),
                clock,
            ),
        }
    }

    /// Decides about `notice`; a notice let through counts as sent for its occurrence.
    pub fn check(&self, notice: &Notice) -> Verdict {
        if !self.events.contains(&notice.kind) {
            return Verdict::NotWanted;
        }
        if notice.subject == self.operator && notice.kind != NoticeType::EndpointEnabled {
            return Verdict::AboutOperator;
        }
        let occurrence = notice.occurrence(self.window_ms);
        let key = (notice.kind, notice.subject.clone());
        let mut sent = self
            .sent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if sent.get(&key).is_some_and(|(last, _)| *last == occurrence) {
            return Verdict::Deduplicated;
        }
        if self.bucket.check().is_err() {
            return Verdict::RateLimited;
        }
        if sent.len() >= MAX_REMEMBERED {
            let window = i64::try_from(self.window_ms).unwrap_or(i64::MAX);
            sent.retain(|_, (_, at)| notice.at_ms.saturating_sub(*at) < window);
        }
        sent.insert(key, (occurrence, notice.at_ms));
        Verdict::Send(notice.id(self.window_ms))
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;
    use std::time::Duration;

    use governor::clock::FakeRelativeClock;

    use super::*;

    const T0: i64 = 1_796_119_200_000;

    fn settings(max_per_minute: u32) -> OperatorWebhooksSettings {
        OperatorWebhooksSettings {
            endpoint_id: "ops".to_owned(),
            events: NoticeType::ALL.into_iter().collect(),
            min_interval: Duration::from_secs(60),
            max_per_minute: NonZeroU32::new(max_per_minute).expect("non-zero"),
        }
    }

    fn opened(endpoint: &str, at_ms: i64) -> Notice {
        Notice::circuit_opened(endpoint, 10, 10, at_ms)
    }

    #[test]
    fn one_notice_per_type_endpoint_and_window() {
        let gate = Gate::with_clock(&settings(100), FakeRelativeClock::default());
        let Verdict::Send(id) = gate.check(&opened("ep", T0)) else {
            panic!("the first is sent");
        };
        assert_eq!(gate.check(&opened("ep", T0 + 1_000)), Verdict::Deduplicated);
        assert!(matches!(gate.check(&opened("other", T0)), Verdict::Send(_)));
        assert!(matches!(
            gate.check(&Notice::circuit_closed("ep", Some(T0), T0 + 2_000)),
            Verdict::Send(_)
        ));
        let Verdict::Send(next) = gate.check(&opened("ep", T0 + 60_000)) else {
            panic!("the next window's is sent");
        };
        assert_ne!(id, next);
    }

    #[test]
    fn the_bucket_holds_a_minute_and_refills() {
        let clock = FakeRelativeClock::default();
        let gate = Gate::with_clock(&settings(3), clock.clone());
        let verdicts: Vec<Verdict> = (0..10)
            .map(|n| gate.check(&opened(&format!("ep-{n}"), T0)))
            .collect();
        let sent = verdicts
            .iter()
            .filter(|v| matches!(v, Verdict::Send(_)))
            .count();
        assert_eq!(sent, 3, "{verdicts:?}");
        assert_eq!(
            verdicts
                .iter()
                .filter(|v| **v == Verdict::RateLimited)
                .count(),
            7
        );
        // A rate-limited notice was not sent: it may go once there is room.
        assert_eq!(gate.check(&opened("ep-9", T0)), Verdict::RateLimited);
        clock.advance(Duration::from_secs(20));
        assert!(matches!(gate.check(&opened("ep-9", T0)), Verdict::Send(_)));
        assert_eq!(gate.check(&opened("ep-8", T0)), Verdict::RateLimited);
    }

    #[test]
    fn the_operator_endpoints_own_trouble_is_never_sent_to_it() {
        let gate = Gate::with_clock(&settings(100), FakeRelativeClock::default());
        for notice in [
            opened("ops", T0),
            Notice::circuit_closed("ops", None, T0),
            Notice::disabled("ops", "gone: HTTP 410", T0),
        ] {
            assert_eq!(gate.check(&notice), Verdict::AboutOperator);
        }
        // That it works again is news, and cannot feed itself.
        assert!(matches!(
            gate.check(&Notice::enabled("ops", None, Some(T0), T0 + 5)),
            Verdict::Send(_)
        ));
    }

    #[test]
    fn only_the_wanted_types_pass() {
        let mut only_disabled = settings(100);
        only_disabled.events = [NoticeType::EndpointDisabled].into_iter().collect();
        let gate = Gate::with_clock(&only_disabled, FakeRelativeClock::default());
        assert_eq!(gate.check(&opened("ep", T0)), Verdict::NotWanted);
        assert!(matches!(
            gate.check(&Notice::disabled("ep", "gone: HTTP 410", T0)),
            Verdict::Send(_)
        ));
    }

    #[test]
    fn memory_stays_bounded() {
        let gate = Gate::with_clock(&settings(u32::MAX), FakeRelativeClock::default());
        for n in 0..(MAX_REMEMBERED + 10) {
            gate.check(&opened(&format!("ep-{n}"), T0));
        }
        gate.check(&opened("late", T0 + 120_000));
        let remembered = gate.sent.lock().map(|sent| sent.len()).unwrap_or(0);
        assert!(remembered < 20, "{remembered}");
    }
}
