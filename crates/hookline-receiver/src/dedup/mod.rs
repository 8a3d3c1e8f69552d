//! De-duplication on `webhook-id`: a [`DedupStore`] claims each id for one copy under a
//! processing lease while the handler runs, and remembers it `succeeded` once the handler
//! answered 2xx. Success and release are compare-and-set on the claim's [`ClaimToken`], so a
//! copy whose lease ran out can never undo the claim of the copy that came after it. Redis
//! ([`RedisStore`]) and PostgreSQL (`PgStore`, cargo feature `postgres`) implement it.

mod error;
#[cfg(test)]
pub(crate) mod memory;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
mod redis;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use self::error::StoreError;
#[cfg(feature = "postgres")]
pub use self::postgres::{PgStore, PgStoreSettings};
pub use self::redis::{RedisStore, RedisStoreSettings};

/// Names one claim of an id: only the copy holding it can mark the id succeeded or
/// release it. Random (128 bits), never reused.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClaimToken(String);

impl ClaimToken {
    /// A fresh random token.
    pub fn random() -> Self {
        ClaimToken(format!("{:032x}", rand::random::<u128>()))
    }

    /// Its text, as the store keeps it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ClaimToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClaimToken({})", self.0)
    }
}

/// What claiming an id found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The id was new, or its last claim failed or its lease ran out: it is now `processing`
    /// under this token, and this request runs the handler.
    Claimed(ClaimToken),
    /// Another copy holds a live lease on it: its handler has not finished (answer 409).
    Processing,
    /// Its handler succeeded already (answer 200 without running it again).
    Succeeded,
}

/// What marking an id succeeded, or releasing it, did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Recorded: the claim was still this token's.
    Recorded,
    /// Nothing changed: the lease ran out and another copy claimed the id since (its own
    /// outcome decides), or the id is no longer known.
    Superseded,
}

/// Where webhook ids are remembered. Each call is atomic in the store, so two copies of a
/// webhook arriving at once cannot both be [`Claim::Claimed`] while a lease is live.
pub trait DedupStore: Send + Sync + 'static {
    /// Claims `id` for this copy unless it succeeded already or another copy holds a live
    /// lease: `processing` for `lease` (after which a retry is processed, so a receiver that
    /// crashed mid-handler blocks the id only that long), the id remembered for `ttl` at
    /// most.
    fn claim(
        &self,
        id: &str,
        lease: Duration,
        ttl: Duration,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send;

    /// Marks `id` `succeeded` for `ttl`, if `token` still holds it: later copies get 200
    /// without the handler.
    fn succeed(
        &self,
        id: &str,
        token: &ClaimToken,
        ttl: Duration,
    ) -> impl Future<Output = Result<Settle, StoreError>> + Send;

    /// Gives the claim up (its handler failed), if `token` still holds it, so that the
    /// sender's retry is processed.
    fn release(
        &self,
        id: &str,
        token: &ClaimToken,
    ) -> impl Future<Output = Result<Settle, StoreError>> + Send;
}

/// A store shared with other code (the application, a health check) is a store too.
impl<D: DedupStore> DedupStore for Arc<D> {
    fn claim(
        &self,
        id: &str,
        lease: Duration,
        ttl: Duration,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send {
        (**self).claim(id, lease, ttl)
    }

    fn succeed(
        &self,
        id: &str,
        token: &ClaimToken,
        ttl: Duration,
    ) -> impl Future<Output = Result<Settle, StoreError>> + Send {
        (**self).succeed(id, token, ttl)
    }

    fn release(
        &self,
        id: &str,
        token: &ClaimToken,
    ) -> impl Future<Output = Result<Settle, StoreError>> + Send {
        (**self).release(id, token)
    }
}
