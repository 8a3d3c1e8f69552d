//! The endpoint table: endpoint configs in a compacted topic, keyed by endpoint id, with
//! a tombstone for a removed endpoint, and turning an endpoint on and off by hand.

mod error;
mod store;
mod switch;
mod table;

pub use error::EndpointStoreError;
pub use store::{EndpointStore, PutIf};
pub use switch::{SwitchError, Switched, disable, enable, manual_reason};
pub use table::EndpointList;
