//! The `[ledger]` section: the delivery ledger as the user configures it.

use hookline_core::secret::Secret;
use serde::{Deserialize, Serialize};

/// The delivery ledger: with a Redis URL, each delivery acknowledged with a 2xx is
/// remembered (`SET NX` with a TTL) and a second copy of the same event to the same
/// endpoint is not delivered again while it is remembered. With a PostgreSQL URL, every
/// delivery's state is kept in `webhook_deliveries` (with an audit trail), and a copy that
/// finds another copy in flight under a live lease is put off. Both: Redis is asked first,
/// PostgreSQL is the record of truth.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LedgerConfig {
    /// `redis://[:password@]host:port[/db]` (`rediss://` for TLS); absent or empty: no
    /// Redis ledger. With one, start-up fails if Redis does not answer a PING.
    pub redis_url: Option<String>,
    /// How long a delivery is remembered in Redis, in seconds.
    pub ttl_s: u64,
    /// Prepended to every key (`<prefix><length of the endpoint id>:<endpoint id>:<event id>`).
    pub key_prefix: String,
    /// The most one Redis command or PostgreSQL statement may take, in milliseconds; past
    /// it the delivery goes on without the ledger's help.
    pub timeout_ms: u64,
    /// `postgres://user:password@host:port/database[?sslmode=require]`, a secret
    /// (`${env:NAME}`/`${file:PATH}` allowed); absent or empty: no PostgreSQL ledger. A
    /// PostgreSQL that is down does not stop start-up: deliveries go on, errors are counted.
    #[serde(skip_serializing)]
    pub postgres_url: Option<Secret>,
    /// The schema of the ledger's tables (made, with the tables, at start-up).
    pub postgres_schema: String,
    /// How long a copy being delivered holds the delivery against other copies, in
    /// milliseconds; longer than an attempt (`http.timeout_ms`) and its admission.
    pub lease_ms: u64,
    /// Rows not updated for this long are removed (and audit rows as old), in seconds.
    pub retention_s: u64,
    /// Rows removed per statement.
    pub retention_batch: u32,
    /// How often old rows are removed, in seconds.
    pub retention_interval_s: u64,
    /// PostgreSQL connections per dispatcher.
    pub postgres_max_connections: u32,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            redis_url: None,
            ttl_s: 7 * 24 * 60 * 60,
            key_prefix: "hookline:delivered:".to_owned(),
            timeout_ms: 1_000,
            postgres_url: None,
            postgres_schema: "public".to_owned(),
            lease_ms: 60_000,
            retention_s: 7 * 24 * 60 * 60,
            retention_batch: 1_000,
            retention_interval_s: 600,
            postgres_max_connections: 8,
        }
    }
}
