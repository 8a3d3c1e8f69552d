//! For receivers of hookline's webhooks: a `tower` layer that verifies Standard Webhooks
//! signatures (`v1` HMAC, `v1a` Ed25519), bounds the body it reads, and hands each
//! `webhook-id` to the handler once, de-duplicated through a [`DedupStore`] (Redis).

mod config;
pub mod dedup;
mod layer;
mod verify;

pub use config::{ConfigError, OnStoreError, ReceiverConfig, ReceiverSettings};
pub use dedup::{Claim, DedupStore, RedisStore, RedisStoreSettings, StoreError};
pub use layer::{WebhookLayer, WebhookService};
pub use verify::{Rejection, Verified, Verifier};
