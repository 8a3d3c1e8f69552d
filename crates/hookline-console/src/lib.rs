//! hookline's operator console: the DLQ, endpoints and event history on a web page served
//! by `hookline console`, with roles, sessions and an audit trail.

pub mod auth;
pub mod config;
mod error;
pub mod insight;
pub mod pages;
pub mod server;
pub mod state;

pub use auth::{Permission, Role, Session};
pub use config::{ConsoleConfig, ConsoleSettings};
pub use error::{ConsoleError, Result};
pub use server::{bind, router, serve};
pub use state::{AppState, ConsoleContext};
