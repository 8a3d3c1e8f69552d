//! The budget slow and unproven endpoints share: a fraction of the dispatcher's attempts,
//! served among them by max-min fair shares in turn ([`FairShare`]), each endpoint at most its
//! own adaptive limit. A unit is held from the moment a record may start until its delivery
//! ends. A record waiting for one (a slow-lane record, or a strict-ordering endpoint's) is a
//! delivery task, woken with its unit in turn.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use hookline_core::fair_share::FairShare;
use tokio::sync::oneshot;

use crate::fast::FastMap;

/// An endpoint id.
pub(crate) type Key = Arc<str>;

struct Waiter {
    id: u64,
    wake: oneshot::Sender<()>,
}

struct State {
    share: FairShare<Key>,
    waiters: FastMap<Key, VecDeque<Waiter>>,
    next_id: u64,
}

/// The shared budget of slow endpoints.
pub(crate) struct Pool {
    state: Mutex<State>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Pool")
            .field("in_use", &state.share.in_use())
            .finish_non_exhaustive()
    }
}

/// A unit of the pool, given back when dropped.
#[derive(Debug)]
pub(crate) struct Unit {
    pool: Arc<Pool>,
    key: Key,
}

impl Drop for Unit {
    fn drop(&mut self) {
        let mut state = self.pool.lock();
        let granted = state.share.release(&self.key);
        self.pool.hand_out(&mut state, granted);
    }
}

impl Pool {
    /// A pool of `capacity` units.
    pub(crate) fn new(capacity: usize) -> Arc<Pool> {
        Arc::new(Pool {
            state: Mutex::new(State {
                share: FairShare::new(capacity),
                waiters: FastMap::default(),
                next_id: 0,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Units held now.
    pub(crate) fn in_use(&self) -> usize {
        self.lock().share.in_use()
    }

    /// A unit for `key`, under its `limit`, if one can be had now without overtaking anyone
    /// who waits under their fair share.
    pub(crate) fn try_take(self: &Arc<Self>, key: &Key, limit: usize) -> Option<Unit> {
        let mut state = self.lock();
        if state.share.request(key, limit) {
            return Some(self.unit(key));
        }
        let granted = state.share.cancel(key);
        self.hand_out(&mut state, granted);
        None
    }

    /// A unit for `key`, waited for in turn. Dropping the future gives up its place (or
    /// gives back a unit granted meanwhile).
    pub(crate) async fn take(self: &Arc<Self>, key: &Key, limit: usize) -> Unit {
        let (id, woken) = {
            let mut state = self.lock();
            if state.share.request(key, limit) {
                return self.unit(key);
            }
            let id = state.next_id;
            state.next_id += 1;
            let (wake, woken) = oneshot::channel();
            state
                .waiters
                .entry(Arc::clone(key))
                .or_default()
                .push_back(Waiter { id, wake });
            (id, woken)
        };
        let mut waiting = Waiting {
            pool: self,
            key,
            id,
            woken,
            done: false,
        };
        // The sender lives in the waiters until it is used, and is removed under the lock
        // before the receiver goes: it always answers.
        let _ = (&mut waiting.woken).await;
        waiting.done = true;
        self.unit(key)
    }

    fn unit(self: &Arc<Self>, key: &Key) -> Unit {
        Unit {
            pool: Arc::clone(self),
            key: Arc::clone(key),
        }
    }

    /// Gives each granted unit to the first waiter of its endpoint.
    fn hand_out(&self, state: &mut State, granted: Vec<Key>) {
        for key in granted {
            let waiter = state.waiters.get_mut(&key).and_then(VecDeque::pop_front);
            if state.waiters.get(&key).is_some_and(VecDeque::is_empty) {
                state.waiters.remove(&key);
            }
            match waiter {
                // Its receiver is dropped only after its waiter is removed: it listens.
                Some(Waiter { wake, .. }) => {
                    let _ = wake.send(());
                }
                None => {
                    // Granted to nobody who waits (cannot happen: each waiting unit has its
                    // waiter); given back rather than lost.
                    tracing::error!(endpoint = &*key, "a unit granted with no waiter");
                    let again = state.share.release(&key);
                    self.hand_out(state, again);
                }
            }
        }
    }
}

/// A task's place in the queue; given up, or its unit given back, if dropped unfinished.
struct Waiting<'a> {
    pool: &'a Arc<Pool>,
    key: &'a Key,
    id: u64,
    woken: oneshot::Receiver<()>,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut state = self.pool.lock();
        let granted = if self.woken.try_recv().is_ok() {
            state.share.release(self.key)
        } else {
            let id = self.id;
            if let Some(waiters) = state.waiters.get_mut(self.key) {
                waiters.retain(|waiter| waiter.id != id);
                if waiters.is_empty() {
                    state.waiters.remove(self.key);
                }
            }
            state.share.cancel(self.key)
        };
        self.pool.hand_out(&mut state, granted);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn key(name: &str) -> Key {
        Arc::from(name)
    }

    #[tokio::test]
    async fn a_unit_goes_to_the_next_waiter_in_turn_and_comes_back_when_dropped() {
        let pool = Pool::new(2);
        let slow = key("slow");
        let first = pool.try_take(&slow, 4).expect("free");
        let _second = pool.try_take(&slow, 4).expect("free");
        assert!(pool.try_take(&slow, 4).is_none(), "all held");
        let quick = key("quick");
        let waiting = tokio::spawn({
            let pool = Arc::clone(&pool);
            async move { pool.take(&quick, 4).await }
        });
        tokio::task::yield_now().await;
        drop(first);
        let unit = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken")
            .expect("task");
        assert_eq!(&*unit.key, "quick");
        assert_eq!(pool.in_use(), 2);
        drop(unit);
        assert_eq!(pool.in_use(), 1);
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_loses_nothing() {
        let pool = Pool::new(1);
        let held = pool.try_take(&key("a"), 1).expect("free");
        let pool2 = Arc::clone(&pool);
        let waited = tokio::time::timeout(Duration::from_millis(20), async move {
            pool2.take(&key("b"), 1).await
        })
        .await;
        assert!(waited.is_err(), "nothing was free");
        drop(held);
        assert_eq!(
            pool.in_use(),
            0,
            "the unit is not kept for the one that left"
        );
        assert!(pool.try_take(&key("c"), 1).is_some());
    }
}
