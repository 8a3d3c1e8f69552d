//! Sessions ended by logging out before their cookie expires: the session cookie is
//! stateless (signed), so a copy kept by someone else would stay valid until its expiry;
//! its id is remembered here until then, and every request's cookie is checked against
//! it. At most [`MAX_REVOKED`] ids are kept: when full, the id expiring soonest is dropped
//! and every session expiring no later than it is refused from then on (some users log in
//! again; no revoked cookie comes back). Kept in memory: a restart forgets them, as it
//! does not change the session key.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::session::CookieValue;

/// The most revoked session ids kept.
pub const MAX_REVOKED: usize = 10_000;

#[derive(Debug, Default)]
struct Table {
    /// Revoked ids and when their sessions expire, epoch milliseconds.
    ids: HashMap<String, i64>,
    /// Sessions expiring at or before this are refused (raised when the table is full).
    floor_ms: i64,
}

/// The revoked sessions, bounded.
#[derive(Debug)]
pub struct Revoked {
    capacity: usize,
    table: Mutex<Table>,
}

impl Default for Revoked {
    fn default() -> Self {
        Revoked::with_capacity(MAX_REVOKED)
    }
}

impl Revoked {
    fn with_capacity(capacity: usize) -> Revoked {
        Revoked {
            capacity: capacity.max(1),
            table: Mutex::new(Table::default()),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // Each change is one insert or removal: a panic cannot leave it half-done.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the session of `cookie` at `now_ms`.
    pub fn revoke(&self, cookie: &CookieValue, now_ms: i64) {
        if cookie.expires_ms <= now_ms {
            return;
        }
        let mut table = self.table();
        table.ids.insert(cookie.id.clone(), cookie.expires_ms);
        if table.ids.len() <= self.capacity {
            return;
        }
        table.ids.retain(|_, expires| *expires > now_ms);
        while table.ids.len() > self.capacity {
            let Some((id, expires)) = table
                .ids
                .iter()
                .min_by_key(|(_, expires)| **expires)
                .map(|(id, expires)| (id.clone(), *expires))
            else {
                break;
            };
            table.ids.remove(&id);
            table.floor_ms = table.floor_ms.max(expires);
        }
    }

    /// Whether the session of `cookie` was ended.
    pub fn contains(&self, cookie: &CookieValue) -> bool {
        let table = self.table();
        cookie.expires_ms <= table.floor_ms || table.ids.contains_key(&cookie.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Identity;

    fn session(now_ms: i64, lifetime_ms: i64) -> CookieValue {
        CookieValue::new("alice", Identity::Token, now_ms, lifetime_ms)
    }

    #[test]
    fn a_revoked_session_is_refused_and_others_are_not() {
        let revoked = Revoked::default();
        let (ended, other) = (session(1_000, 500), session(1_000, 500));
        revoked.revoke(&ended, 1_200);
        assert!(revoked.contains(&ended));
        assert!(!revoked.contains(&other));
        // An expired session is refused anyway: nothing to keep.
        let expired = session(0, 100);
        revoked.revoke(&expired, 1_200);
        assert_eq!(revoked.table().ids.len(), 1);
    }

    #[test]
    fn when_full_the_soonest_expiring_go_and_no_revoked_session_comes_back() {
        let revoked = Revoked::with_capacity(3);
        let sessions: Vec<_> = (0..6).map(|n| session(1_000 + n, 10_000)).collect();
        for s in &sessions {
            revoked.revoke(s, 1_000);
            assert!(revoked.table().ids.len() <= 3);
        }
        for s in &sessions {
            assert!(revoked.contains(s), "{}", s.expires_ms);
        }
        // A session that expires later than every dropped one is not refused.
        assert!(!revoked.contains(&session(1_010, 10_000)));
        // Expired ids make room first.
        revoked.revoke(&session(30_000, 10_000), 20_000);
        assert_eq!(revoked.table().ids.len(), 1);
    }
}
