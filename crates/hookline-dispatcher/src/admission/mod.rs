//! Admission: which budget a record draws on, decided once when the poll loop takes it in,
//! before it holds anything but its pending place. A fast endpoint's records are held up to
//! its queue. A slow or new endpoint's record goes to the slow lane at once, without an
//! attempt, so that no attempt that may hang holds the commit of the partitions healthy
//! endpoints share (one failing or throttling at once runs where it is when a unit of their
//! budget is free: its attempt cannot hold the commit for long); from the lane it runs with
//! a unit of the budget such endpoints share ([`pool`]), or waits for one in memory, in fair
//! turn, holding one of a bounded number of waiting places (a quarter of the pending
//! records), so that the lane is read past an endpoint whose turn is far; the lane's
//! partitions pause only while those places are all taken. So no number of slow endpoints
//! holds more than their share, and a healthy endpoint's records are never behind theirs.

mod pool;
mod standing;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

pub(crate) use pool::{Pool, Unit};
pub(crate) use standing::Class;
use standing::Standing;

/// One endpoint's standing and queue, kept across its config changes.
#[derive(Debug)]
pub(crate) struct Gate {
    key: Arc<str>,
    standing: Mutex<Standing>,
    fast: AtomicBool,
    slow: AtomicBool,
    /// Woken when the endpoint turns slow: its records waiting in memory (but those from the
    /// slow lane) move to the slow lane.
    pub slowed: Notify,
}

impl Gate {
    /// The gate of endpoint `id`, with concurrency cap `max_concurrency`.
    pub(crate) fn new(id: &str, max_concurrency: usize, slow_after: Duration) -> Gate {
        Gate {
            key: Arc::from(id),
            standing: Mutex::new(Standing::new(max_concurrency, slow_after)),
            fast: AtomicBool::new(false),
            slow: AtomicBool::new(false),
            slowed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Standing> {
        self.standing
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The endpoint's id, shared.
    pub(crate) fn key(&self) -> &Arc<str> {
        &self.key
    }

    /// Its standing now; waiters are woken when it turns slow.
    pub(crate) fn class(&self, now: Instant, circuit_open: bool) -> Class {
        let class = self.lock().class(now, circuit_open);
        self.note(class);
        class
    }

    fn note(&self, class: Class) {
        self.fast.store(class == Class::Fast, Ordering::Release);
        let slow = class == Class::Slow;
        if !self.slow.swap(slow, Ordering::AcqRel) && slow {
            self.slowed.notify_waiters();
        }
    }

    /// Whether it was fast when last looked at.
    pub(crate) fn was_fast(&self) -> bool {
        self.fast.load(Ordering::Acquire)
    }

    /// When its attempts running now will have stalled (none ending for `slow_after`), if
    /// some run.
    pub(crate) fn stalls_at(&self) -> Option<Instant> {
        self.lock().stalls_at()
    }

    /// Whether its attempts end quickly, well or not, at `now` (see
    /// [`Standing::answers_quickly`]).
    pub(crate) fn answers_quickly(&self, now: Instant) -> bool {
        self.lock().answers_quickly(now)
    }

    /// Attempts it may run at once now.
    pub(crate) fn limit(&self) -> usize {
        self.lock().limit()
    }

    /// An attempt begins.
    pub(crate) fn attempt_started(&self) {
        self.lock().attempt_started(Instant::now());
    }

    /// An attempt that took `took` ended, showing the endpoint alive (`ok`) or not.
    pub(crate) fn attempt_ended(&self, took: Duration, ok: bool) {
        let now = Instant::now();
        let class = {
            let mut standing = self.lock();
            standing.attempt_ended(now, took, ok);
            standing.class(now, false)
        };
        self.note(class);
    }

    /// An attempt that began ended without an answer (cancelled).
    pub(crate) fn attempt_abandoned(&self) {
        self.lock().attempt_abandoned();
    }

    /// Whether its queue of `capacity` has room again.
    pub(crate) fn has_room(&self, capacity: usize) -> bool {
        self.lock().has_room(capacity)
    }
}

/// What a record taken in holds until its delivery ends.
#[derive(Debug, Default)]
pub(crate) enum Ticket {
    /// Nothing (a strict-ordering endpoint's record, waiting in its chain; a record of no
    /// known endpoint; a tier record that hops).
    #[default]
    Nothing,
    /// A place in its fast or unproven endpoint's queue (freed when dropped).
    Held(#[allow(dead_code)] Held),
    /// A unit of the slow endpoints' pool (given back when dropped).
    Unit(#[allow(dead_code)] Unit),
    /// A slow-lane record waiting in memory for a unit: one of the waiting places.
    Waiting(#[allow(dead_code)] OwnedSemaphorePermit),
    /// Nothing: it goes to the slow lane at once, without an attempt, for this reason (a
    /// metric label).
    ToLane(&'static str),
}

impl Ticket {
    /// Whether it holds a unit of the pool.
    pub(crate) fn has_unit(&self) -> bool {
        matches!(self, Ticket::Unit(_))
    }

    /// Whether it waits for a unit where it is, in a waiting place (it is not sent to the
    /// lane).
    pub(crate) fn waits_in_place(&self) -> bool {
        matches!(self, Ticket::Waiting(_))
    }
}

/// A place in an endpoint's queue, freed when dropped.
#[derive(Debug)]
pub(crate) struct Held(Arc<Gate>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.lock().unhold();
    }
}

/// Why a record goes to the slow lane: its endpoint is slow.
pub(crate) const SLOW: &str = "endpoint_slow";
/// Why a record goes to the slow lane: its fast endpoint's queue is full.
pub(crate) const QUEUE_FULL: &str = "endpoint_queue_full";
/// Why a record goes to the slow lane: its endpoint is new (no attempt of it has ended well
/// yet).
pub(crate) const NEW: &str = "endpoint_new";
/// Why a record goes to the slow lane: its endpoint keeps strict order, and its records
/// always wait their turn there (in order), never on a partition other endpoints share.
pub(crate) const STRICT: &str = "strict_ordering";

/// Why a slow-lane record cannot be taken in now: its partition pauses.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Its fast endpoint's queue is full, and drains quickly or this is a slow-lane record
    /// (otherwise a record goes to the lane).
    QueueFull,
    /// Every waiting place is taken by records waiting for their turn.
    LaneFull,
}

/// The dispatcher's admission: the queue size of each endpoint, the slow endpoints' pool,
/// and the places of records waiting for it in memory.
#[derive(Debug)]
pub(crate) struct Admission {
    pub pool: Arc<Pool>,
    queue: usize,
    waiting_places: Arc<Semaphore>,
    waiting_capacity: usize,
}

impl Admission {
    /// Endpoint queues of `queue` records; slow endpoints share `pool` attempts; at most
    /// `waiting` records wait for them in memory.
    pub(crate) fn new(queue: usize, pool: usize, waiting: usize) -> Admission {
        let waiting_capacity = waiting.max(1);
        Admission {
            pool: Pool::new(pool),
            queue: queue.max(1),
            waiting_places: Arc::new(Semaphore::new(waiting_capacity)),
            waiting_capacity,
        }
    }

    /// What a record of `gate`'s endpoint holds to run now, or why it waits. `from_lane`:
    /// it was read from the slow lane; `circuit`: how long the endpoint's circuit stays open.
    pub(crate) fn enter(
        &self,
        gate: &Arc<Gate>,
        from_lane: bool,
        circuit: Option<Duration>,
    ) -> Result<Ticket, Wait> {
        let now = Instant::now();
        let class = gate.class(now, circuit.is_some());
        match class {
            Class::Fast => {
                let mut standing = gate.lock();
                if standing.hold(self.queue) {
                    drop(standing);
                    Ok(Ticket::Held(Held(Arc::clone(gate))))
                } else if from_lane || standing.drains_quickly(self.queue) {
                    // Its partition waits for it: not long.
                    Err(Wait::QueueFull)
                } else {
                    Ok(Ticket::ToLane(QUEUE_FULL))
                }
            }
            // Only the slow lane's commits may wait on an attempt that can hang: a record of
            // an endpoint not proven fast runs from the lane alone.
            Class::Unproven | Class::Slow => {
                if circuit.is_some() {
                    // Deferred by its circuit at once, holding nothing (a tier, for the rest
                    // of the open time).
                    return Ok(Ticket::Nothing);
                }
                if !from_lane {
                    // Failing or throttling at once, its attempt holds the partition's
                    // commit only briefly: with a unit free now, it runs where it is,
                    // sparing each retry a write to the lane and a read from it.
                    if gate.answers_quickly(now)
                        && let Some(unit) = self.pool.try_take(gate.key(), gate.limit())
                    {
                        return Ok(Ticket::Unit(unit));
                    }
                    let why = if class == Class::Slow { SLOW } else { NEW };
                    return Ok(Ticket::ToLane(why));
                }
                if let Some(unit) = self.pool.try_take(gate.key(), gate.limit()) {
                    return Ok(Ticket::Unit(unit));
                }
                match Arc::clone(&self.waiting_places).try_acquire_owned() {
                    Ok(place) => Ok(Ticket::Waiting(place)),
                    Err(_) => Err(Wait::LaneFull),
                }
            }
        }
    }

    /// Whether a partition paused for `gate`'s endpoint's full queue may go on:
    /// the queue has room, or the endpoint is not fast any more (its records then need
    /// units, not places).
    pub(crate) fn queue_has_room(&self, gate: &Gate) -> bool {
        gate.has_room(self.queue) || !gate.was_fast()
    }

    /// Units of the pool held, and records waiting for one in memory.
    pub(crate) fn in_use(&self) -> (usize, usize) {
        let waiting = self.waiting_capacity - self.waiting_places.available_permits();
        (self.pool.in_use(), waiting)
    }

    /// Whether slow-lane partitions paused for want of waiting places may go on: half of
    /// the places are free.
    pub(crate) fn lane_has_room(&self) -> bool {
        self.waiting_places.available_permits() >= self.waiting_capacity.div_ceil(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLOW_AFTER: Duration = Duration::from_secs(1);

    fn slow_gate(id: &str) -> Arc<Gate> {
        let gate = Arc::new(Gate::new(id, 2, SLOW_AFTER));
        for _ in 0..4 {
            gate.attempt_started();
            gate.attempt_ended(Duration::from_secs(2), true);
        }
        gate
    }

    #[test]
    fn a_fast_endpoint_holds_up_to_its_queue_then_waits() {
        let admission = Admission::new(2, 4, 4);
        let gate = Arc::new(Gate::new("fast", 16, SLOW_AFTER));
        gate.attempt_started();
        gate.attempt_ended(Duration::from_millis(5), true);
        let first = admission.enter(&gate, false, None).expect("held");
        let _second = admission.enter(&gate, false, None).expect("held");
        // Its queue drains in well under a tenth of `slow_after`: the partition waits.
        assert_eq!(
            admission.enter(&gate, false, None).unwrap_err(),
            Wait::QueueFull
        );
        assert_eq!(
            admission.enter(&gate, true, None).unwrap_err(),
            Wait::QueueFull,
            "a lane record waits in the lane"
        );
        assert!(!admission.queue_has_room(&gate));
        drop(first);
        assert!(admission.queue_has_room(&gate));
    }

    #[test]
    fn a_fast_endpoint_whose_full_queue_drains_slowly_sends_the_next_record_to_the_lane() {
        let admission = Admission::new(4, 4, 4);
        let gate = Arc::new(Gate::new("fair", 1, SLOW_AFTER));
        gate.attempt_started();
        gate.attempt_ended(Duration::from_millis(500), true);
        let _held: Vec<Ticket> = (0..4)
            .map(|_| admission.enter(&gate, false, None).expect("held"))
            .collect();
        // Two records at 500 ms one at a time: a second, not a tenth of one.
        assert!(matches!(
            admission.enter(&gate, false, None),
            Ok(Ticket::ToLane(QUEUE_FULL))
        ));
    }

    #[test]
    fn a_new_endpoints_records_run_from_the_lane_alone_up_to_its_limit() {
        let admission = Admission::new(8, 8, 1);
        let gate = Arc::new(Gate::new("new", 2, SLOW_AFTER));
        assert!(matches!(
            admission.enter(&gate, false, None),
            Ok(Ticket::ToLane(NEW))
        ));
        let units: Vec<Ticket> = (0..2)
            .map(|_| admission.enter(&gate, true, None).expect("admitted"))
            .collect();
        assert!(units.iter().all(Ticket::has_unit), "up to its limit");
        let waiting = admission.enter(&gate, true, None).expect("a waiting place");
        assert!(waiting.waits_in_place());
    }

    #[test]
    fn a_slow_endpoint_goes_to_the_lane_and_from_there_runs_with_a_unit_or_waits_in_a_place() {
        let admission = Admission::new(8, 1, 1);
        let (a, b) = (slow_gate("a"), slow_gate("b"));
        assert!(matches!(
            admission.enter(&a, false, None),
            Ok(Ticket::ToLane(SLOW))
        ));
        let unit = admission.enter(&a, true, None).expect("a unit");
        assert!(unit.has_unit());
        // From the lane, b waits where it is, in one of the waiting places.
        let waiting = admission.enter(&b, true, None).expect("a waiting place");
        assert!(waiting.waits_in_place());
        assert!(!admission.lane_has_room());
        assert_eq!(admission.enter(&b, true, None).unwrap_err(), Wait::LaneFull);
        drop(waiting);
        assert!(admission.lane_has_room());
        drop(unit);
        assert!(
            admission
                .enter(&b, true, None)
                .expect("admitted")
                .has_unit()
        );
    }

    #[test]
    fn a_record_of_an_endpoint_failing_at_once_runs_in_place_with_a_free_unit() {
        let admission = Admission::new(8, 1, 1);
        let failing = Arc::new(Gate::new("failing", 2, SLOW_AFTER));
        for _ in 0..4 {
            failing.attempt_started();
            failing.attempt_ended(Duration::from_millis(2), false);
        }
        let unit = admission.enter(&failing, false, None).expect("a unit");
        assert!(unit.has_unit(), "{unit:?}");
        // The pool's one unit is taken: to the lane.
        assert!(matches!(
            admission.enter(&failing, false, None),
            Ok(Ticket::ToLane(SLOW))
        ));
        drop(unit);
        // A slow one goes to the lane, unit free or not.
        assert!(matches!(
            admission.enter(&slow_gate("slow"), false, None),
            Ok(Ticket::ToLane(SLOW))
        ));
    }

    #[test]
    fn a_record_whose_circuit_is_open_holds_nothing_from_the_lane_or_not() {
        let admission = Admission::new(8, 1, 1);
        let gate = Arc::new(Gate::new("down", 16, SLOW_AFTER));
        let open = Some(Duration::from_secs(30));
        for from_lane in [false, true] {
            assert!(matches!(
                admission.enter(&gate, from_lane, open),
                Ok(Ticket::Nothing)
            ));
        }
        assert_eq!(admission.pool.in_use(), 0);
    }
}
