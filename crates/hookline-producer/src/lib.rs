//! hookline's producer side: publishing webhook events and provisioning the topics (the endpoint table follows).

pub mod provision;
pub mod publisher;
pub mod topics;

pub use provision::{ProvisionError, ProvisionReport, TopicsPlan, provision};
pub use publisher::{Delivered, Encoding, PublishError, Publisher, PublisherConfig};
pub use topics::{DEFAULT_ENDPOINTS_TOPIC, DEFAULT_EVENTS_TOPIC, Topics};
