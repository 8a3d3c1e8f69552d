//! Whether the dispatcher is full, and for whom: the poll loop holds a fetched record that
//! found no pending place, and says which endpoint it is for. A record that has waited past
//! `queue_wait` for its own endpoint gives way (moves to a tier) only when another endpoint's
//! record is held back, or when a record of its own endpoint has been held for `queue_wait`
//! too (the endpoint frees its places too slowly for the records behind it, whoever they
//! are for). So a slow endpoint that has the dispatcher to itself keeps its backlog in place
//! instead of sending it round a tier again and again, and one that holds everything up
//! still makes room.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// How long the poll loop holds a record before it says so. An endpoint that frees a place
/// within it keeps its waiting records in place without waking them: saying it at once woke
/// every waiting record twice per delivery (a fifth of the slow scenario's throughput).
const SAY_AFTER: Duration = Duration::from_millis(10);

/// Who is held back for want of a pending place.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) enum Starved {
    /// Nobody: the poll loop has room.
    #[default]
    Nobody,
    /// A record for this endpoint.
    Endpoint(Arc<str>),
    /// A record of no known endpoint (a malformed record, a fan-out event, an unknown key).
    Other,
}

impl Starved {
    /// Whether a record of `endpoint`, past its deadline, must give way to whoever is held
    /// back. Records of the same endpoint never do: the held one would only take the place
    /// of the one that left, after a round trip through a tier.
    pub(crate) fn must_give_way(&self, endpoint: &str) -> bool {
        match self {
            Starved::Nobody => false,
            Starved::Endpoint(held) => held.as_ref() != endpoint,
            Starved::Other => true,
        }
    }
}

/// The poll loop's side: says who is held back. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Pressure(Arc<watch::Sender<Starved>>);

impl Default for Pressure {
    fn default() -> Self {
        Pressure(Arc::new(watch::Sender::new(Starved::Nobody)))
    }
}

impl Pressure {
    /// A record for `endpoint` (`None`: of no known endpoint) waits for a pending place.
    /// Waiting records are woken only when this changes what they see.
    pub(crate) fn starved(&self, endpoint: Option<&str>) {
        let starved = endpoint.map_or(Starved::Other, |id| Starved::Endpoint(id.into()));
        self.0.send_if_modified(|current| {
            let changed = *current != starved;
            *current = starved;
            changed
        });
    }

    /// The held record found its place.
    pub(crate) fn relieved(&self) {
        self.0.send_if_modified(|starved| {
            let was_starved = *starved != Starved::Nobody;
            *starved = Starved::Nobody;
            was_starved
        });
    }

    /// A view for a waiting record.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Starved> {
        self.0.subscribe()
    }
}

/// The record the poll loop holds, and what it has said of it so far: nothing for
/// [`SAY_AFTER`], then which endpoint it is for, then after `queue_wait` that everyone past
/// their deadline is to give way.
pub(crate) struct Hold {
    since: Instant,
    endpoint: Option<Arc<str>>,
    said: Said,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Said {
    Nothing,
    Endpoint,
    Everyone,
}

impl Hold {
    /// A record for `endpoint` (`None`: of no known endpoint) held from now.
    pub(crate) fn new(endpoint: Option<&str>) -> Hold {
        Hold {
            since: Instant::now(),
            endpoint: endpoint.map(Into::into),
            said: Said::Nothing,
        }
    }

    /// When it says more; `None` once it has said everything.
    pub(crate) fn next_at(&self, queue_wait: Duration) -> Option<Instant> {
        match self.said {
            Said::Nothing => Some(self.since + SAY_AFTER.min(queue_wait)),
            Said::Endpoint => Some(self.since + queue_wait),
            Said::Everyone => None,
        }
    }

    /// Says the next thing.
    pub(crate) fn escalate(&mut self, pressure: &Pressure) {
        self.said = match (self.said, &self.endpoint) {
            (Said::Nothing, Some(endpoint)) => {
                pressure.starved(Some(endpoint));
                Said::Endpoint
            }
            (Said::Nothing | Said::Endpoint, _) => {
                pressure.starved(None);
                Said::Everyone
            }
            (Said::Everyone, _) => Said::Everyone,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_gives_way_to_another_endpoint_only() {
        assert!(!Starved::Nobody.must_give_way("slow"));
        assert!(!Starved::Endpoint("slow".into()).must_give_way("slow"));
        assert!(Starved::Endpoint("fast".into()).must_give_way("slow"));
        assert!(Starved::Other.must_give_way("slow"));
    }

    #[tokio::test]
    async fn a_waiting_record_sees_the_pressure_change() {
        let pressure = Pressure::default();
        let mut view = pressure.subscribe();
        assert_eq!(*view.borrow_and_update(), Starved::Nobody);
        pressure.starved(Some("fast"));
        view.changed().await.expect("changed");
        assert!(view.borrow_and_update().must_give_way("slow"));
        pressure.relieved();
        view.changed().await.expect("changed");
        assert_eq!(*view.borrow_and_update(), Starved::Nobody);
        // Relieving again, or saying the same twice, wakes nobody.
        pressure.relieved();
        assert!(!view.has_changed().expect("open"));
        pressure.starved(Some("slow"));
        view.changed().await.expect("changed");
        view.borrow_and_update();
        pressure.starved(Some("slow"));
        assert!(!view.has_changed().expect("open"));
    }

    #[test]
    fn a_hold_says_nothing_at_first_then_for_whom_then_everyone() {
        let pressure = Pressure::default();
        let view = pressure.subscribe();
        let queue_wait = Duration::from_secs(1);
        let mut hold = Hold::new(Some("slow"));
        let start = hold.since;
        assert_eq!(hold.next_at(queue_wait), Some(start + SAY_AFTER));
        assert_eq!(*view.borrow(), Starved::Nobody, "nothing said yet");
        hold.escalate(&pressure);
        assert_eq!(*view.borrow(), Starved::Endpoint("slow".into()));
        assert_eq!(hold.next_at(queue_wait), Some(start + queue_wait));
        hold.escalate(&pressure);
        assert_eq!(*view.borrow(), Starved::Other);
        assert_eq!(hold.next_at(queue_wait), None);
        // A record of no known endpoint: everyone at once.
        let mut unknown = Hold::new(None);
        pressure.relieved();
        unknown.escalate(&pressure);
        assert_eq!(*view.borrow(), Starved::Other);
    }
}
