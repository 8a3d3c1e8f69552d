//! Failed logins per client address: after `max_failures` within `lockout`, the address is
//! refused for `lockout` without its token being checked. At most [`MAX_CLIENTS`]
//! addresses are remembered: when full, forgotten failures go first, then the oldest
//! address not refused, then the one whose refusal ends soonest.
//!
//! Written here rather than with `governor` (a kept crate): its keyed limiter counts every
//! check, with no way to look without spending, so a good login would cost as much as a
//! bad one; and its store shrinks only when told, never below the addresses it holds.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::LoginLimits;

/// The most client addresses remembered at once.
pub const MAX_CLIENTS: usize = 10_000;

/// Who a login is from, for the back-off: an IPv4 address, or an IPv6 address's /64 (one
/// host usually holds a whole /64). IPv4-mapped IPv6 addresses are their IPv4 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientKey(IpAddr);

impl ClientKey {
    /// The key of a client at `address`.
    pub fn of(address: IpAddr) -> ClientKey {
        match address {
            IpAddr::V4(v4) => ClientKey(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientKey(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !u128::from(u64::MAX);
                    ClientKey(IpAddr::V6(prefix.into()))
                }
            },
        }
    }
}

/// One address's failures.
#[derive(Clone, Copy, Debug)]
struct Strikes {
    /// Failures since `since`.
    failures: u32,
    /// The first of them.
    since: Instant,
    /// Refused until then, once `failures` reached the limit.
    refused_until: Option<Instant>,
}

impl Strikes {
    /// Whether nothing of it counts any more at `now`.
    fn is_spent(&self, now: Instant, lockout: Duration) -> bool {
        match self.refused_until {
            Some(until) => until <= now,
            None => self.since + lockout <= now,
        }
    }
}

/// Failed logins by client address, bounded.
#[derive(Debug)]
pub struct Backoff {
    max_failures: u32,
    lockout: Duration,
    capacity: usize,
    clients: Mutex<HashMap<ClientKey, Strikes>>,
}

impl Backoff {
    /// A back-off with `limits`, remembering at most [`MAX_CLIENTS`] addresses.
    pub fn new(limits: &LoginLimits) -> Backoff {
        Backoff::with_capacity(limits, MAX_CLIENTS)
    }

    fn with_capacity(limits: &LoginLimits, capacity: usize) -> Backoff {
        Backoff {
            max_failures: limits.max_failures,
            lockout: limits.lockout,
            capacity: capacity.max(1),
            clients: Mutex::new(HashMap::new()),
        }
    }

    fn clients(&self) -> std::sync::MutexGuard<'_, HashMap<ClientKey, Strikes>> {
        // A panic while holding it cannot leave a count half-written: use it as it is.
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long `client` is still refused at `now`; `None` when it may log in.
    pub fn refused_for(&self, client: ClientKey, now: Instant) -> Option<Duration> {
        let clients = self.clients();
        let until = clients.get(&client)?.refused_until?;
        (until > now).then(|| until - now)
    }

    /// Counts a failed login of `client` at `now`.
    pub fn failed(&self, client: ClientKey, now: Instant) {
        let mut clients = self.clients();
        if !clients.contains_key(&client) && clients.len() >= self.capacity {
            self.make_room(&mut clients, now);
        }
        let fresh = Strikes {
            failures: 0,
            since: now,
            refused_until: None,
        };
        let strikes = clients.entry(client).or_insert(fresh);
        if strikes.is_spent(now, self.lockout) {
            *strikes = fresh;
        }
        strikes.failures = strikes.failures.saturating_add(1);
        if strikes.failures >= self.max_failures {
            strikes.refused_until = Some(now + self.lockout);
        }
    }

    fn make_room(&self, clients: &mut HashMap<ClientKey, Strikes>, now: Instant) {
        clients.retain(|_, s| !s.is_spent(now, self.lockout));
        if clients.len() < self.capacity {
            return;
        }
        // An address not refused loses least when forgotten; among refused ones, the one
        // whose refusal ends soonest.
        let victim = clients
            .iter()
            .min_by_key(|(_, s)| (s.refused_until.is_some(), s.refused_until, s.since))
            .map(|(key, _)| *key);
        if let Some(key) = victim {
            clients.remove(&key);
        }
    }

    /// How many addresses are remembered.
    pub fn len(&self) -> usize {
        self.clients().len()
    }

    /// Whether no address is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv6Addr;

    use super::*;

    fn limits(max_failures: u32) -> LoginLimits {
        LoginLimits {
            max_concurrent: 2,
            max_failures,
            lockout: Duration::from_secs(60),
        }
    }

    fn client(last: u8) -> ClientKey {
        ClientKey::of(IpAddr::from([10, 0, 0, last]))
    }

    #[test]
    fn an_address_is_refused_after_its_failures_until_the_lockout_ends() {
        let backoff = Backoff::new(&limits(3));
        let start = Instant::now();
        let (mallory, alice) = (client(1), client(2));
        for n in 0..2 {
            backoff.failed(mallory, start + Duration::from_secs(n));
            assert_eq!(backoff.refused_for(mallory, start), None, "after {n}");
        }
        backoff.failed(mallory, start + Duration::from_secs(2));
        assert_eq!(
            backoff.refused_for(mallory, start + Duration::from_secs(2)),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            backoff.refused_for(mallory, start + Duration::from_secs(50)),
            Some(Duration::from_secs(12))
        );
        assert_eq!(backoff.refused_for(alice, start), None, "others are not");
        let later = start + Duration::from_secs(62);
        assert_eq!(backoff.refused_for(mallory, later), None);
        // Its failures are then forgotten: the limit counts again from one.
        backoff.failed(mallory, later);
        assert_eq!(backoff.refused_for(mallory, later), None);
    }

    #[test]
    fn failures_older_than_the_lockout_are_forgotten() {
        let backoff = Backoff::new(&limits(2));
        let start = Instant::now();
        backoff.failed(client(1), start);
        backoff.failed(client(1), start + Duration::from_secs(61));
        assert_eq!(
            backoff.refused_for(client(1), start + Duration::from_secs(61)),
            None
        );
    }

    #[test]
    fn ipv6_addresses_count_by_their_64_and_mapped_ipv4_as_ipv4() {
        let a: Ipv6Addr = "2001:db8:1:2::1".parse().expect("v6");
        let b: Ipv6Addr = "2001:db8:1:2:ffff::9".parse().expect("v6");
        let c: Ipv6Addr = "2001:db8:1:3::1".parse().expect("v6");
        assert_eq!(ClientKey::of(a.into()), ClientKey::of(b.into()));
        assert_ne!(ClientKey::of(a.into()), ClientKey::of(c.into()));
        let mapped: Ipv6Addr = "::ffff:10.0.0.1".parse().expect("v6");
        assert_eq!(ClientKey::of(mapped.into()), client(1));
    }

    #[test]
    fn the_table_is_bounded_and_keeps_refused_addresses_longest() {
        let backoff = Backoff::with_capacity(&limits(2), 3);
        let start = Instant::now();
        backoff.failed(client(1), start);
        backoff.failed(client(1), start);
        assert!(backoff.refused_for(client(1), start).is_some());
        for n in 2..=20 {
            backoff.failed(client(n), start + Duration::from_secs(u64::from(n)));
            assert!(backoff.len() <= 3, "{} remembered", backoff.len());
        }
        let now = start + Duration::from_secs(20);
        assert!(
            backoff.refused_for(client(1), now).is_some(),
            "the refused address outlives the others"
        );
        // Addresses whose failures are spent make room first.
        let much_later = start + Duration::from_secs(600);
        backoff.failed(client(99), much_later);
        assert_eq!(backoff.len(), 1);
    }
}
