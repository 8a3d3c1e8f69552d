//! Helpers for end-to-end tests against the real local stack (see `deploy/local/stack`).

mod auth_proxy;
pub mod bombs;
mod compat;
mod machine;
mod private_kafka;
mod proxy;
mod receiver;
mod redis;
mod stack;
mod tls;
mod topics;
mod wait;

pub use auth_proxy::{AuthProxy, Credentials};
pub use compat::v1_avro_value;
pub use machine::Machine;
pub use private_kafka::PrivateKafka;
pub use proxy::Proxy;
pub use receiver::{Received, Receiver, Reply, Script};
pub use redis::RedisServer;
pub use stack::{
    kafka_settings, postgres_url, registry_settings, secure_bootstrap, secure_ca_file,
    secure_kafka_settings, secure_password_file, secure_properties, unique_name,
};
pub use tls::{Issued, TestPki, TlsReceived, TlsReceiver};
pub use topics::{TestTopics, read_all};
pub use wait::wait_until;
