//! The endpoint table: what each endpoint id means, kept current from Kafka or a file.

mod file;
pub mod lifecycle;
mod loader;
mod table;

pub use loader::load_file;
pub use table::{Endpoint, EndpointDefaults, EndpointTable};
