//! hookline-receiver's integration tests, one binary: the Redis store and the layer against
//! a real `redis-server` each test starts, and hookline's dispatcher (in-process, on the
//! real local stack from `deploy/local/stack up`) delivering to a receiver behind the layer.

mod dispatcher;
mod store;
