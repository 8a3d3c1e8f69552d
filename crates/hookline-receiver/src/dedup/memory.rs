//! An in-memory [`DedupStore`] for unit tests only (no TTL, no lease expiry, one process);
//! the tokens are compared as the real stores compare them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{Claim, ClaimToken, DedupStore, Settle, StoreError};

/// What the store holds for an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Processing,
    Succeeded,
}

#[derive(Debug, Default)]
pub(crate) struct MemoryStore {
    /// Per id: the state and the token of the claim holding it (`None` once succeeded).
    states: Mutex<HashMap<String, (State, Option<ClaimToken>)>>,
    /// When set, every call fails as an unreachable store would.
    pub(crate) down: AtomicBool,
}

impl MemoryStore {
    pub(crate) fn state(&self, id: &str) -> Option<State> {
        self.states.lock().ok()?.get(id).map(|(state, _)| *state)
    }

    fn check(&self, op: &'static str) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            Err(StoreError::Timeout {
                op,
                after: Duration::ZERO,
            })
        } else {
            Ok(())
        }
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut HashMap<String, (State, Option<ClaimToken>)>) -> T,
    ) -> Result<T, StoreError> {
        let mut states = self
            .states
            .lock()
            .map_err(|_| StoreError::Unexpected { op: "lock" })?;
        Ok(f(&mut states))
    }
}

impl DedupStore for MemoryStore {
    async fn claim(&self, id: &str, _lease: Duration, _ttl: Duration) -> Result<Claim, StoreError> {
        self.check("SET")?;
        self.with(|s| match s.get(id) {
            Some((State::Processing, _)) => Claim::Processing,
            Some((State::Succeeded, _)) => Claim::Succeeded,
            None => {
                let token = ClaimToken::random();
                s.insert(id.to_owned(), (State::Processing, Some(token.clone())));
                Claim::Claimed(token)
            }
        })
    }

    async fn succeed(
        &self,
        id: &str,
        token: &ClaimToken,
        _ttl: Duration,
    ) -> Result<Settle, StoreError> {
        self.check("SET")?;
        self.with(|s| match s.get(id) {
            Some((State::Processing, Some(holder))) if holder == token => {
                s.insert(id.to_owned(), (State::Succeeded, None));
                Settle::Recorded
            }
            _ => Settle::Superseded,
        })
    }

    async fn release(&self, id: &str, token: &ClaimToken) -> Result<Settle, StoreError> {
        self.check("DEL")?;
        self.with(|s| match s.get(id) {
            Some((State::Processing, Some(holder))) if holder == token => {
                s.remove(id);
                Settle::Recorded
            }
            _ => Settle::Superseded,
        })
    }
}
