//! hookline-receiver's integration tests, one binary: the Redis store and the layer against
//! a real `redis-server` each test starts, the PostgreSQL store against the local stack's
//! PostgreSQL (a schema per test), and hookline's dispatcher (in-process, on the real local
//! stack from `deploy/local/stack up`) delivering to a receiver behind the layer.

mod dispatcher;
#[cfg(feature = "postgres")]
mod postgres;
mod store;
mod support;
