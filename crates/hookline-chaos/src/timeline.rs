//! What a scenario did when (kills, restarts, outages), for the report and the log.

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::clock::Clock;

/// One thing done.
#[derive(Clone, Debug, Serialize)]
pub struct Fault {
    /// When, on the scenario's clock.
    pub at: f64,
    /// What.
    pub what: String,
}

/// A scenario's timeline; clones share it.
#[derive(Clone)]
pub struct Timeline {
    scenario: Arc<str>,
    clock: Clock,
    faults: Arc<Mutex<Vec<Fault>>>,
}

impl Timeline {
    /// An empty timeline for `scenario`.
    pub fn new(scenario: &str, clock: Clock) -> Self {
        Timeline {
            scenario: Arc::from(scenario),
            clock,
            faults: Arc::default(),
        }
    }

    /// Notes `what` now, also on stderr; returns the time.
    pub fn note(&self, what: impl Into<String>) -> f64 {
        let at = self.clock.now();
        let what = what.into();
        eprintln!("chaos: [{} {at:6.1} s] {what}", self.scenario);
        self.faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Fault { at, what });
        at
    }

    /// Everything noted, in order.
    pub fn all(&self) -> Vec<Fault> {
        self.faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}
