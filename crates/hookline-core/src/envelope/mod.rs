//! The dead-letter envelope: a parked delivery with its original record and the reason.

mod reason;

pub use reason::{ErrorReason, UnknownReason};
