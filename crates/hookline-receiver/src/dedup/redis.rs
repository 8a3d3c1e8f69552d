//! The Redis [`DedupStore`]: one key per webhook id, `<prefix><webhook-id>`, whose value is
//! `processing:<token>` or `succeeded`. Claimed with `SET key processing:<token> NX GET PX
//! lease` (one atomic command that also tells what an existing key holds; Redis 7.0 or
//! later), so a crashed receiver's claim runs out after the lease; success and release are
//! small Lua scripts that compare the token first, so a copy whose lease ran out cannot
//! touch the claim of the copy after it.

use std::fmt;
use std::time::Duration;

use redis::Client;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{Claim, ClaimToken, DedupStore, Settle, StoreError};

const PROCESSING: &str = "processing";
const SUCCEEDED: &str = "succeeded";

/// KEYS[1] the id's key, ARGV[1] `processing:<token>`, ARGV[2] the TTL in seconds. Records
/// success when the key is this claim's, or gone (the lease ran out and no copy came).
const SUCCEED: &str = "
local found = redis.call('GET', KEYS[1])
if found == false or found == ARGV[1] then
  redis.call('SET', KEYS[1], 'succeeded', 'EX', ARGV[2])
  return 1
end
return 0";

/// KEYS[1] the id's key, ARGV[1] `processing:<token>`: deletes the key only if it is this
/// claim's.
const RELEASE: &str = "
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0";

fn processing(token: &ClaimToken) -> String {
    format!("{PROCESSING}:{}", token.as_str())
}

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
    async fn claim(&self, id: &str, lease: Duration, _ttl: Duration) -> Result<Claim, StoreError> {
        let token = ClaimToken::random();
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.key(id))
            .arg(processing(&token))
            .arg("NX")
            .arg("GET")
            .arg("PX")
            .arg(millis(lease));
        let found: Option<String> = self.query("SET", cmd).await?;
        match found.as_deref() {
            None => Ok(Claim::Claimed(token)),
            Some(SUCCEEDED) => Ok(Claim::Succeeded),
            // `processing` alone: a key written before claims had tokens.
            Some(value) if value.split(':').next() == Some(PROCESSING) => Ok(Claim::Processing),
            Some(_) => Err(StoreError::Unexpected { op: "SET" }),
        }
    }

    async fn succeed(
        &self,
        id: &str,
        token: &ClaimToken,
        ttl: Duration,
    ) -> Result<Settle, StoreError> {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(SUCCEED)
            .arg(1)
            .arg(self.key(id))
            .arg(processing(token))
            .arg(ttl.as_secs().max(1));
        settled("EVAL succeed", self.query("EVAL succeed", cmd).await?)
    }

    async fn release(&self, id: &str, token: &ClaimToken) -> Result<Settle, StoreError> {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(RELEASE)
            .arg(1)
            .arg(self.key(id))
            .arg(processing(token));
        settled("EVAL release", self.query("EVAL release", cmd).await?)
    }
}

fn settled(op: &'static str, changed: i64) -> Result<Settle, StoreError> {
    match changed {
        1 => Ok(Settle::Recorded),
        0 => Ok(Settle::Superseded),
        _ => Err(StoreError::Unexpected { op }),
    }
}

/// A lease in milliseconds for `PX`, at least 1.
fn millis(lease: Duration) -> u64 {
    u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1)
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
