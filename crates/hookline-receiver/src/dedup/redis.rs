//! The Redis [`DedupStore`]: one key per webhook id, `<prefix><webhook-id>`, whose value is
//! `processing` or `succeeded`; claimed with `SET key processing NX GET EX ttl` (one atomic
//! command that also tells what an existing key holds; Redis 7.0 or later).

use std::fmt;
use std::time::Duration;

use redis::Client;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{Claim, DedupStore, StoreError};

const PROCESSING: &str = "processing";
const SUCCEEDED: &str = "succeeded";

/// Where the Redis store connects and how it names its keys.
#[derive(Clone)]
pub struct RedisStoreSettings {
    /// `redis://[:password@]host:port[/db]` (or `rediss://`).
    pub url: hookline_core::secret::Secret,
    /// Prepended to every webhook id.
    pub key_prefix: String,
    /// The most one command may take, connecting included.
    pub timeout: Duration,
}

impl RedisStoreSettings {
    /// Settings for `url` with the default prefix (`hookline:receiver:`) and a 1 s timeout.
    pub fn new(url: hookline_core::secret::Secret) -> Self {
        RedisStoreSettings {
            url,
            key_prefix: "hookline:receiver:".to_owned(),
            timeout: Duration::from_secs(1),
        }
    }

    /// The URL with its password hidden.
    pub fn redacted_url(&self) -> String {
        hookline_core::url_guard::redact_url(self.url.expose())
    }
}

impl fmt::Debug for RedisStoreSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStoreSettings")
            .field("url", &self.redacted_url())
            .field("key_prefix", &self.key_prefix)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// A multiplexed connection that reconnects by itself; every command is bounded by the
/// timeout, so an unreachable Redis costs a request at most that long.
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    settings: RedisStoreSettings,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects and checks that Redis answers PING.
    pub async fn connect(settings: RedisStoreSettings) -> Result<RedisStore, StoreError> {
        let client = Client::open(settings.url.expose()).map_err(|source| StoreError::BadUrl {
            url: settings.redacted_url(),
            source,
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.timeout))
            .set_response_timeout(Some(settings.timeout))
            .set_number_of_retries(2)
            .set_max_delay(settings.timeout);
        let conn = bounded(
            "connect",
            settings.timeout,
            ConnectionManager::new_with_config(client, config),
        )
        .await?;
        let store = RedisStore { conn, settings };
        let pong: String = store.query("PING", redis::cmd("PING")).await?;
        if pong != "PONG" {
            return Err(StoreError::Unexpected { op: "PING" });
        }
        Ok(store)
    }

    /// The key of one webhook id.
    pub fn key(&self, id: &str) -> String {
        format!("{}{id}", self.settings.key_prefix)
    }

    async fn query<T: redis::FromRedisValue>(
        &self,
        op: &'static str,
        cmd: redis::Cmd,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.clone();
        bounded(op, self.settings.timeout, async move {
            cmd.query_async::<T>(&mut conn).await
        })
        .await
    }
}

impl DedupStore for RedisStore {
    async fn claim(&self, id: &str, ttl: Duration) -> Result<Claim, StoreError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.key(id))
            .arg(PROCESSING)
            .arg("NX")
            .arg("GET")
            .arg("EX")
            .arg(ttl.as_secs().max(1));
        let found: Option<String> = self.query("SET", cmd).await?;
        match found.as_deref() {
            None => Ok(Claim::Claimed),
            Some(PROCESSING) => Ok(Claim::Processing),
            Some(SUCCEEDED) => Ok(Claim::Succeeded),
            Some(_) => Err(StoreError::Unexpected { op: "SET" }),
        }
    }

    async fn succeed(&self, id: &str, ttl: Duration) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.key(id))
            .arg(SUCCEEDED)
            .arg("EX")
            .arg(ttl.as_secs().max(1));
        let _: String = self.query("SET", cmd).await?;
        Ok(())
    }

    async fn release(&self, id: &str) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.key(id));
        let _: u64 = self.query("DEL", cmd).await?;
        Ok(())
    }
}

async fn bounded<T>(
    op: &'static str,
    after: Duration,
    call: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(after, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(source)) => Err(StoreError::Redis { op, source }),
        Err(_) => Err(StoreError::Timeout { op, after }),
    }
}
