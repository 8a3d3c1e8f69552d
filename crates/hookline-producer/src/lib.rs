//! hookline's producer side: publishing webhook events, provisioning the topics, and
//! managing the endpoint table.

pub mod endpoints;
pub mod outbox;
pub mod provision;
pub mod publisher;
pub mod topics;

pub use endpoints::{EndpointList, EndpointStore, EndpointStoreError, PutIf};
pub use provision::{ProvisionError, ProvisionReport, TopicsPlan, provision};
pub use publisher::{Delivered, Encoding, PublishError, Publisher, PublisherConfig};
pub use topics::{DEFAULT_ENDPOINTS_TOPIC, DEFAULT_EVENTS_TOPIC, Topics};
