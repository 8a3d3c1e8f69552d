//! Fair shares of one budget (attempts in flight, records held) among the endpoints that
//! want it: max-min fairness over units of equal cost, served round robin. An endpoint may
//! hold at most its own limit; a free unit goes first to an endpoint that waits and holds
//! less than its fair share (the budget over the endpoints that hold or want some, at least
//! one), in turn, and only when none does, in turn to any that waits under its limit, so that
//! no unit stays free while someone could use it. So an endpoint whose units come back
//! quickly keeps its share beside any number of endpoints that hold theirs for seconds, and
//! those still get what is left. Pure bookkeeping: the dispatcher keeps the waiters and
//! wakes the ones this grants to.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// One endpoint's units: held, waited for, and its own limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Units {
    held: usize,
    waiting: usize,
    limit: usize,
}

/// The budget and who holds and wants it.
#[derive(Clone, Debug)]
pub struct FairShare<K> {
    capacity: usize,
    in_use: usize,
    keys: HashMap<K, Units>,
    /// Endpoints with waiting units, in the order they are served; each at most once.
    turns: VecDeque<K>,
}

impl<K: Clone + Eq + Hash> FairShare<K> {
    /// A budget of `capacity` units (at least one).
    pub fn new(capacity: usize) -> Self {
        FairShare {
            capacity: capacity.max(1),
            in_use: 0,
            keys: HashMap::new(),
            turns: VecDeque::new(),
        }
    }

    /// Units held now, over all endpoints.
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    /// Units `key` holds now.
    pub fn held(&self, key: &K) -> usize {
        self.keys.get(key).map_or(0, |units| units.held)
    }

    /// The fair share of one endpoint now: the budget over the endpoints that hold or want
    /// units, at least one unit.
    pub fn fair_share(&self) -> usize {
        (self.capacity / self.keys.len().max(1)).max(1)
    }

    /// Sets `key`'s own limit (at least one unit); units it holds past a lower limit stay
    /// held until released. Returns the endpoints granted a unit by the change, one entry a
    /// unit.
    pub fn set_limit(&mut self, key: &K, limit: usize) -> Vec<K> {
        self.entry(key).limit = limit.max(1);
        self.grant()
    }

    /// A unit for `key` (its limit `limit` if it has none yet): `true` when it is granted at
    /// once, `false` when it waits for a later call's grants. Nobody who waits could use a
    /// free unit (each call grants what it can), so a request served at once overtakes only
    /// waiters that are at their limit.
    pub fn request(&mut self, key: &K, limit: usize) -> bool {
        let units = self.keys.entry(key.clone()).or_insert(Units {
            held: 0,
            waiting: 0,
            limit: limit.max(1),
        });
        units.waiting += 1;
        if units.waiting == 1 {
            self.turns.push_back(key.clone());
        }
        let granted = self.grant();
        debug_assert!(granted.iter().all(|k| k == key), "only the new waiter");
        !granted.is_empty()
    }

    /// A waiting unit of `key` gave up before it was granted.
    pub fn cancel(&mut self, key: &K) -> Vec<K> {
        if let Some(units) = self.keys.get_mut(key)
            && units.waiting > 0
        {
            units.waiting -= 1;
            if units.waiting == 0 {
                self.turns.retain(|turn| turn != key);
            }
            self.forget_if_idle(key);
        }
        self.grant()
    }

    /// A unit `key` held is back. Returns the endpoints granted a unit now, one entry a
    /// unit, in the order they were served.
    pub fn release(&mut self, key: &K) -> Vec<K> {
        if let Some(units) = self.keys.get_mut(key)
            && units.held > 0
        {
            units.held -= 1;
            self.in_use -= 1;
            self.forget_if_idle(key);
        }
        self.grant()
    }

    fn entry(&mut self, key: &K) -> &mut Units {
        self.keys.entry(key.clone()).or_insert(Units {
            held: 0,
            waiting: 0,
            limit: 1,
        })
    }

    fn forget_if_idle(&mut self, key: &K) {
        if self
            .keys
            .get(key)
            .is_some_and(|units| units.held == 0 && units.waiting == 0)
        {
            self.keys.remove(key);
        }
    }

    /// Grants free units: first in turn to those under their fair share, then in turn to
    /// any under its limit.
    fn grant(&mut self) -> Vec<K> {
        let mut granted = Vec::new();
        for below_share_only in [true, false] {
            let mut passes = self.turns.len();
            while self.in_use < self.capacity && passes > 0 {
                passes -= 1;
                let Some(key) = self.turns.pop_front() else {
                    break;
                };
                let share = self.fair_share();
                let Some(units) = self.keys.get_mut(&key) else {
                    continue;
                };
                let cap = if below_share_only {
                    units.limit.min(share)
                } else {
                    units.limit
                };
                if units.held < cap {
                    units.held += 1;
                    units.waiting -= 1;
                    self.in_use += 1;
                    granted.push(key.clone());
                    // Served: another pass over everyone before it is served again.
                    passes = self.turns.len() + usize::from(units.waiting > 0);
                }
                if units.waiting > 0 {
                    self.turns.push_back(key);
                }
            }
        }
        granted
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_quick_endpoint_gets_the_next_unit_beside_slow_ones_that_hold_everything() {
        let mut share = FairShare::new(10);
        for _ in 0..30 {
            share.request(&"slow", 10);
        }
        assert_eq!(
            share.held(&"slow"),
            10,
            "alone, it may use the whole budget"
        );
        assert!(!share.request(&"quick", 10), "nothing is free");
        // The next unit back goes to the endpoint under its share, not to the 20 waiting.
        assert_eq!(share.release(&"slow"), vec!["quick"]);
        // The quick one's unit comes back and goes to it again while it waits.
        assert!(!share.request(&"quick", 10));
        assert_eq!(share.release(&"quick"), vec!["quick"]);
        // Until it holds its share (10 / 2), each unit the slow one frees is the quick one's.
        for _ in 0..4 {
            share.request(&"quick", 10);
        }
        let granted: Vec<_> = (0..4).flat_map(|_| share.release(&"slow")).collect();
        assert_eq!(granted, vec!["quick"; 4]);
        assert_eq!((share.held(&"quick"), share.held(&"slow")), (5, 5));
        // At its share, units go round: the slow one's waiters get theirs too.
        share.request(&"quick", 10);
        assert_eq!(share.release(&"slow"), vec!["slow"]);
    }

    #[test]
    fn no_unit_stays_free_while_someone_could_use_it() {
        let mut share = FairShare::new(4);
        assert!(share.request(&"a", 1));
        assert!(!share.request(&"a", 1), "its own limit");
        assert!(share.request(&"b", 4));
        assert!(share.request(&"b", 4));
        assert!(
            share.request(&"b", 4),
            "past its share, but the unit is free"
        );
        assert_eq!(share.in_use(), 4);
        assert_eq!(
            share.set_limit(&"a", 2),
            Vec::<&str>::new(),
            "nothing is free"
        );
        assert_eq!(share.release(&"b"), vec!["a"]);
    }

    #[test]
    fn a_waiter_that_gives_up_is_no_longer_served() {
        let mut share = FairShare::new(1);
        assert!(share.request(&"a", 1));
        assert!(!share.request(&"b", 1));
        assert!(!share.request(&"c", 1));
        assert_eq!(share.cancel(&"b"), Vec::<&str>::new());
        assert_eq!(share.release(&"a"), vec!["c"]);
        assert_eq!(share.release(&"c"), Vec::<&str>::new());
        assert_eq!(share.in_use(), 0);
    }

    #[derive(Clone, Copy, Debug)]
    enum Step {
        Request(u8, u8),
        Release(u8),
        Cancel(u8),
        Limit(u8, u8),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u8..6, 1u8..6).prop_map(|(k, l)| Step::Request(k, l)),
            3 => (0u8..6).prop_map(Step::Release),
            1 => (0u8..6).prop_map(Step::Cancel),
            1 => (0u8..6, 1u8..6).prop_map(|(k, l)| Step::Limit(k, l)),
        ]
    }

    proptest! {
        #![proptest_config(crate::fuzz::config(512))]

        /// Whatever happens: the budget and each limit hold, no unit stays free while a
        /// waiter under its limit could take it, and the counts add up.
        #[test]
        fn the_budget_holds_and_nothing_idles(capacity in 1usize..8, steps in proptest::collection::vec(step(), 0..200)) {
            let mut share = FairShare::new(capacity);
            let mut held = HashMap::<u8, usize>::new();
            let mut waiting = HashMap::<u8, usize>::new();
            for step in steps {
                let granted = match step {
                    Step::Request(k, l) => {
                        if share.request(&k, usize::from(l)) {
                            *held.entry(k).or_default() += 1;
                        } else {
                            *waiting.entry(k).or_default() += 1;
                        }
                        Vec::new()
                    }
                    Step::Release(k) => {
                        let had = held.get(&k).copied().unwrap_or(0);
                        let granted = share.release(&k);
                        if had > 0 {
                            *held.entry(k).or_default() -= 1;
                        }
                        granted
                    }
                    Step::Cancel(k) => {
                        let had = waiting.get(&k).copied().unwrap_or(0);
                        let granted = share.cancel(&k);
                        if had > 0 {
                            *waiting.entry(k).or_default() -= 1;
                        }
                        granted
                    }
                    Step::Limit(k, l) => {
                        if held.get(&k).copied().unwrap_or(0) + waiting.get(&k).copied().unwrap_or(0) == 0 {
                            continue;
                        }
                        share.set_limit(&k, usize::from(l))
                    }
                };
                for k in granted {
                    *held.entry(k).or_default() += 1;
                    let left = waiting.entry(k).or_default();
                    prop_assert!(*left > 0, "granted to a key that did not wait");
                    *left -= 1;
                }
                let total: usize = held.values().sum();
                prop_assert_eq!(share.in_use(), total);
                prop_assert!(total <= capacity);
                for (k, n) in &held {
                    prop_assert_eq!(share.held(k), *n);
                }
                if total < capacity {
                    for (k, w) in &waiting {
                        let under_limit = share.keys.get(k).is_some_and(|u| u.held < u.limit);
                        prop_assert!(*w == 0 || !under_limit, "{k} waits with a unit free");
                    }
                }
            }
        }
    }
}
