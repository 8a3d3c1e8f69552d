//! The gate every token login goes through: a client address refused after its failed
//! logins is refused at once ([`Backoff`]); otherwise the login takes one of a few permits
//! (refused at once when none is free, never queued) and checks the token against one
//! hash only: the named user's, or, for a name no user has, a dummy hash of the same cost,
//! so that the time taken does not tell which names exist.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use argon2::password_hash::{Output, PasswordHash, SaltString};
use rand::RngCore;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::LoginLimits;
use super::backoff::{Backoff, ClientKey};
use super::token::TokenHash;
use crate::config::User;

/// Why a login was not checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Every permit is taken: try again in a moment.
    Busy,
    /// The client's address failed too often: refused for this long.
    Backoff(Duration),
}

/// The gate: permits, the back-off, the users and the dummy hash.
#[derive(Debug)]
pub struct LoginGate {
    permits: Arc<Semaphore>,
    backoff: Backoff,
    users: Arc<[User]>,
    dummy: Option<TokenHash>,
    verifications: AtomicU64,
}

impl LoginGate {
    /// The gate of `users` under `limits`.
    pub fn new(users: &[User], limits: &LoginLimits) -> LoginGate {
        LoginGate {
            permits: Arc::new(Semaphore::new(limits.max_concurrent)),
            backoff: Backoff::new(limits),
            users: users.into(),
            dummy: users.first().and_then(|u| dummy_like(&u.token_hash)),
            verifications: AtomicU64::new(0),
        }
    }

    /// Checks a login of `name` with `token` from `client`: the user's name when the token
    /// is theirs, `None` when not (counted against the address), or why it was not checked.
    pub async fn check(
        &self,
        client: IpAddr,
        name: &str,
        token: &str,
    ) -> Result<Option<String>, Refusal> {
        let client = ClientKey::of(client);
        if let Some(wait) = self.backoff.refused_for(client, Instant::now()) {
            return Err(Refusal::Backoff(wait));
        }
        let permit = Arc::clone(&self.permits)
            .try_acquire_owned()
            .map_err(|_| Refusal::Busy)?;
        self.verifications.fetch_add(1, Ordering::Relaxed);
        let (users, dummy) = (Arc::clone(&self.users), self.dummy.clone());
        let (name, token) = (name.to_owned(), token.to_owned());
        let checked = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            find_user(&users, dummy.as_ref(), &name, &token, TokenHash::verify)
                .map(|user| user.name.clone())
        })
        .await;
        let found = checked.unwrap_or_else(|error| {
            tracing::error!(%error, "a console login's token check failed");
            None
        });
        if found.is_none() {
            // A good login does not clear the count: else a user could interleave their
            // own logins with guesses at others' tokens.
            self.backoff.failed(client, Instant::now());
        }
        Ok(found)
    }

    /// How many token checks ran.
    pub fn verifications(&self) -> u64 {
        self.verifications.load(Ordering::Relaxed)
    }
}

/// The user `name` when `token` is theirs, checked with exactly one call of `verify`: on
/// their hash, or on `dummy` when no user has that name (and then never a match).
pub(crate) fn find_user<'a>(
    users: &'a [User],
    dummy: Option<&TokenHash>,
    name: &str,
    token: &str,
    mut verify: impl FnMut(&TokenHash, &str) -> bool,
) -> Option<&'a User> {
    match users.iter().find(|u| u.name == name) {
        Some(user) => verify(&user.token_hash, token).then_some(user),
        None => {
            if let Some(dummy) = dummy {
                verify(dummy, token);
            }
            None
        }
    }
}

/// A hash no token matches (a random salt and output) with `like`'s algorithm and cost, so
/// that checking a token against it takes as long as against `like`.
fn dummy_like(like: &TokenHash) -> Option<TokenHash> {
    let parsed = PasswordHash::new(like.as_str()).ok()?;
    let mut salt = [0_u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).ok()?;
    let mut output = vec![0_u8; parsed.hash.map_or(32, |h| h.len())];
    rand::rng().fill_bytes(&mut output);
    let dummy = PasswordHash {
        salt: Some(salt.as_salt()),
        hash: Some(Output::new(&output).ok()?),
        ..parsed
    };
    TokenHash::parse(&dummy.to_string()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;
    use crate::auth::token::hash_token;

    fn users() -> Vec<User> {
        ["alice", "bob", "carol"]
            .into_iter()
            .map(|name| User {
                name: name.to_owned(),
                role: Role::Operator,
                token_hash: TokenHash::parse(
                    &hash_token(&format!("{name}-token-0123456789")).expect("hash"),
                )
                .expect("valid"),
            })
            .collect()
    }

    fn limits(max_concurrent: usize, max_failures: u32) -> LoginLimits {
        LoginLimits {
            max_concurrent,
            max_failures,
            lockout: Duration::from_secs(60),
        }
    }

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn an_unknown_user_costs_one_verification_and_a_known_one_one() {
        let users = users();
        let dummy = users[0].token_hash.clone();
        let mut count = 0;
        let found = find_user(
            &users,
            Some(&dummy),
            "mallory",
            "alice-token-0123456789",
            |h, t| {
                count += 1;
                h.verify(t)
            },
        );
        assert_eq!(count, 1, "verifications for an unknown user");
        assert!(found.is_none(), "an unknown name never logs in");
        let mut count = 0;
        let found = find_user(
            &users,
            Some(&dummy),
            "bob",
            "bob-token-0123456789",
            |h, t| {
                count += 1;
                h.verify(t)
            },
        );
        assert_eq!(found.map(|u| u.name.as_str()), Some("bob"));
        assert_eq!(count, 1, "verifications for a known user");
        // Another user's token does not log in as the name given.
        let found = find_user(
            &users,
            Some(&dummy),
            "bob",
            "alice-token-0123456789",
            |h, t| h.verify(t),
        );
        assert!(found.is_none());
    }

    #[test]
    fn the_dummy_hash_has_the_users_cost_and_matches_nothing() {
        let users = users();
        let like = PasswordHash::new(users[0].token_hash.as_str()).expect("phc");
        let dummy = dummy_like(&users[0].token_hash).expect("a dummy");
        let parsed = PasswordHash::new(dummy.as_str()).expect("phc");
        assert_eq!(parsed.algorithm, like.algorithm);
        assert_eq!(parsed.params, like.params);
        assert_eq!(parsed.hash.map(|h| h.len()), like.hash.map(|h| h.len()));
        assert_ne!(parsed.salt, like.salt);
        for token in ["", "alice-token-0123456789"] {
            assert!(!dummy.verify(token));
        }
    }

    #[tokio::test]
    async fn a_good_login_works_and_an_unknown_name_is_checked_once() {
        let gate = LoginGate::new(&users(), &limits(2, 5));
        let found = gate.check(HERE, "carol", "carol-token-0123456789").await;
        assert_eq!(found, Ok(Some("carol".to_owned())));
        let found = gate.check(HERE, "mallory", "carol-token-0123456789").await;
        assert_eq!(found, Ok(None));
        assert_eq!(gate.verifications(), 2, "one check per login");
    }

    #[tokio::test]
    async fn a_login_beyond_the_permits_is_refused_at_once() {
        let gate = LoginGate::new(&users(), &limits(2, 5));
        let held = Arc::clone(&gate.permits)
            .try_acquire_many_owned(2)
            .expect("both permits");
        let refused = gate.check(HERE, "alice", "alice-token-0123456789").await;
        assert_eq!(refused, Err(Refusal::Busy));
        assert_eq!(gate.verifications(), 0, "nothing was checked");
        drop(held);
        let found = gate.check(HERE, "alice", "alice-token-0123456789").await;
        assert_eq!(found, Ok(Some("alice".to_owned())));
        assert_eq!(gate.permits.available_permits(), 2, "the permit came back");
    }

    #[tokio::test]
    async fn an_address_that_failed_too_often_is_refused_without_a_check() {
        let gate = LoginGate::new(&users(), &limits(2, 2));
        for _ in 0..2 {
            assert_eq!(
                gate.check(HERE, "alice", "guess-0123456789").await,
                Ok(None)
            );
        }
        let refused = gate.check(HERE, "alice", "alice-token-0123456789").await;
        assert!(
            matches!(refused, Err(Refusal::Backoff(wait)) if wait > Duration::ZERO && wait <= Duration::from_secs(60)),
            "{refused:?}"
        );
        assert_eq!(gate.verifications(), 2);
        let elsewhere = IpAddr::from([10, 0, 0, 7]);
        let found = gate
            .check(elsewhere, "alice", "alice-token-0123456789")
            .await;
        assert_eq!(found, Ok(Some("alice".to_owned())));
    }
}
