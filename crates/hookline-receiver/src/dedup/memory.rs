//! An in-memory [`DedupStore`] for unit tests only (no TTL, one process).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::{Claim, DedupStore, StoreError};

#[derive(Debug, Default)]
pub(crate) struct MemoryStore {
    states: Mutex<HashMap<String, Claim>>,
    /// When set, every call fails as an unreachable store would.
    pub(crate) down: std::sync::atomic::AtomicBool,
}

impl MemoryStore {
    pub(crate) fn state(&self, id: &str) -> Option<Claim> {
        self.states.lock().ok()?.get(id).copied()
    }

    fn check(&self, op: &'static str) -> Result<(), StoreError> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            Err(StoreError::Timeout {
                op,
                after: Duration::ZERO,
            })
        } else {
            Ok(())
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Claim>) -> T) -> Result<T, StoreError> {
        let mut states = self
            .states
            .lock()
            .map_err(|_| StoreError::Unexpected { op: "lock" })?;
        Ok(f(&mut states))
    }
}

impl DedupStore for MemoryStore {
    async fn claim(&self, id: &str, _ttl: Duration) -> Result<Claim, StoreError> {
        self.check("SET")?;
        self.with(|s| match s.get(id) {
            Some(found) => *found,
            None => {
                s.insert(id.to_owned(), Claim::Processing);
                Claim::Claimed
            }
        })
    }

    async fn succeed(&self, id: &str, _ttl: Duration) -> Result<(), StoreError> {
        self.check("SET")?;
        self.with(|s| {
            s.insert(id.to_owned(), Claim::Succeeded);
        })
    }

    async fn release(&self, id: &str) -> Result<(), StoreError> {
        self.check("DEL")?;
        self.with(|s| {
            s.remove(id);
        })
    }
}
