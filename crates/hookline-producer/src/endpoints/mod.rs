//! The endpoint table: endpoint configs in a compacted topic, keyed by endpoint id, with
//! a tombstone for a removed endpoint.

mod error;
pub mod lifecycle;
mod store;
mod table;

pub use error::EndpointStoreError;
pub use store::{EndpointStore, PutIf};
pub use table::EndpointList;
