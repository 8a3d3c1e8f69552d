//! hookline's operator console: the DLQ, endpoints and event history on a web page served
//! by `hookline console`, with roles, sessions and an audit trail.

pub mod insight;
