//! De-duplication on `webhook-id`: a [`DedupStore`] remembers each id as `processing` while
//! the handler runs and `succeeded` once it answered 2xx; Redis implements it
//! ([`RedisStore`]), and a PostgreSQL store can implement the same trait.

#[cfg(test)]
pub(crate) mod memory;
mod redis;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use self::redis::{RedisStore, RedisStoreSettings};

/// What claiming an id found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The id was new: it is now `processing`, and this request runs the handler.
    Claimed,
    /// Another request holds it and its handler has not finished (answer 409).
    Processing,
    /// Its handler succeeded already (answer 200 without running it again).
    Succeeded,
}

/// Why the store could not answer. Never holds the store's password.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store's URL cannot be used.
    #[error("{url} is not a Redis URL: {source}")]
    BadUrl {
        /// The URL, password hidden.
        url: String,
        /// The client's parse error.
        #[source]
        source: ::redis::RedisError,
    },
    /// A command failed, or the connection did.
    #[error("redis {op} failed: {source}")]
    Redis {
        /// The command.
        op: &'static str,
        /// The client's error.
        #[source]
        source: ::redis::RedisError,
    },
    /// The store did not answer in time.
    #[error("redis {op} got no answer within {after:?}")]
    Timeout {
        /// The command.
        op: &'static str,
        /// The configured timeout.
        after: Duration,
    },
    /// The store answered something its protocol does not have.
    #[error("redis {op} answered an unexpected value")]
    Unexpected {
        /// The command.
        op: &'static str,
    },
}

impl StoreError {
    /// The failing operation, a low-cardinality label.
    pub fn op(&self) -> &'static str {
        match self {
            StoreError::BadUrl { .. } => "connect",
            StoreError::Redis { op, .. }
            | StoreError::Timeout { op, .. }
            | StoreError::Unexpected { op } => op,
        }
    }
}

/// Where webhook ids are remembered. Each call is atomic in the store, so two copies of a
/// webhook arriving at once cannot both be [`Claim::Claimed`].
pub trait DedupStore: Send + Sync + 'static {
    /// Marks `id` `processing` for `ttl` unless it is known; says what it found.
    fn claim(
        &self,
        id: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send;

    /// Marks `id` `succeeded` for `ttl`: later copies get 200 without the handler.
    fn succeed(
        &self,
        id: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Forgets `id` (its handler failed), so that the sender's retry is processed.
    fn release(&self, id: &str) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// A store shared with other code (the application, a health check) is a store too.
impl<D: DedupStore> DedupStore for Arc<D> {
    fn claim(
        &self,
        id: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send {
        (**self).claim(id, ttl)
    }

    fn succeed(
        &self,
        id: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).succeed(id, ttl)
    }

    fn release(&self, id: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).release(id)
    }
}
