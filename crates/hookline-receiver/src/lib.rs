//! For receivers of hookline's webhooks: a `tower` layer that verifies Standard Webhooks
//! signatures (`v1` HMAC, `v1a` Ed25519), bounds the body it reads, and hands each
//! `webhook-id` to the handler once, de-duplicated through a [`DedupStore`] (Redis, or
//! PostgreSQL with the `postgres` feature, on by default) under a processing lease.

mod config;
pub mod dedup;
mod layer;
mod verify;

pub use config::{ConfigError, OnStoreError, ReceiverConfig, ReceiverSettings};
pub use dedup::{
    Claim, ClaimToken, DedupStore, RedisStore, RedisStoreSettings, Settle, StoreError,
};
#[cfg(feature = "postgres")]
pub use dedup::{PgStore, PgStoreSettings};
pub use layer::{WebhookLayer, WebhookService};
pub use verify::{Rejection, Verified, Verifier};
