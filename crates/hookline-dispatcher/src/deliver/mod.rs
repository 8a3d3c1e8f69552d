//! One HTTP attempt: the request built from the event, the address guard, the send.

mod guard;
mod http;
mod request;

pub use guard::precheck;
pub use http::{Attempt, HttpSender};
pub use request::{RequestParts, build_request};
