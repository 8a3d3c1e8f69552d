//! Whether the dispatcher is full, and for whom: the poll loop holds a fetched record that
//! found no pending place, and says which endpoint it is for. A record that has waited past
//! `queue_wait` for its own endpoint gives way (moves to a tier) only when another endpoint's
//! record is held back, or when a record of its own endpoint has been held for `queue_wait`
//! too (the endpoint frees its places too slowly for the records behind it, whoever they
//! are for). So a slow endpoint that has the dispatcher to itself keeps its backlog in place
//! instead of sending it round a tier again and again, and one that holds everything up
//! still makes room.

use std::sync::Arc;

use tokio::sync::watch;

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
    pub(crate) fn starved(&self, endpoint: Option<&str>) {
        let starved = endpoint.map_or(Starved::Other, |id| Starved::Endpoint(id.into()));
        self.0.send_replace(starved);
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
        // Relieving again changes nothing.
        pressure.relieved();
        assert!(!view.has_changed().expect("open"));
    }
}
