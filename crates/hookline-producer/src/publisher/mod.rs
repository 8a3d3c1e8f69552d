//! Publishing webhook events to the events topic: validated, keyed by endpoint, with the
//! `webhook-id` header, as Avro through the registry or as JSON.

mod config;
mod error;
mod prepare;
mod publish;

pub use config::{Encoding, PublisherConfig};
pub use error::PublishError;
pub use publish::{Delivered, Publisher};
