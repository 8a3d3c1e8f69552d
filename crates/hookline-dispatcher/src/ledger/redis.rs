//! The Redis delivery ledger: a key per (endpoint, event) acknowledged with a 2xx, written
//! `SET NX` with a TTL, so that a second copy of the event (a duplicate publish, a replay
//! after a lost commit, a re-drive) is not delivered again while it is remembered.

use std::fmt;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::{LedgerError, LedgerResult};
use crate::settings::RedisSettings;

/// The ledger: one multiplexed connection that reconnects by itself; every command is
/// bounded by the timeout, so an unreachable Redis costs a delivery at most that long.
#[derive(Clone)]
pub(crate) struct RedisLedger {
    conn: ConnectionManager,
    settings: RedisSettings,
    /// Stored as the key's value: who acknowledged the delivery.
    owner: String,
}

impl fmt::Debug for RedisLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLedger")
            .field("settings", &self.settings)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

impl RedisLedger {
    /// Connects and checks with a PING that Redis answers.
    pub async fn connect(settings: &RedisSettings, owner: &str) -> LedgerResult<RedisLedger> {
        let client = settings.client()?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.timeout))
            .set_response_timeout(Some(settings.timeout))
            // Reconnection is retried on the next command too; a short burst is enough.
            .set_number_of_retries(2)
            .set_max_delay(settings.timeout);
        let conn = bounded(
            "connect",
            settings.timeout,
            ConnectionManager::new_with_config(client, config),
        )
        .await?;
        let ledger = RedisLedger {
            conn,
            settings: settings.clone(),
            owner: owner.to_owned(),
        };
        ledger.ping().await?;
        Ok(ledger)
    }

    /// PING: is Redis there?
    pub async fn ping(&self) -> LedgerResult<()> {
        let answer: String = self.query("PING", redis::cmd("PING")).await?;
        if answer == "PONG" {
            Ok(())
        } else {
            Err(LedgerError::Unexpected { op: "PING", answer })
        }
    }

    /// Whether `endpoint` already acknowledged `event_id`.
    pub async fn was_delivered(&self, endpoint: &str, event_id: &str) -> LedgerResult<bool> {
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(self.key(endpoint, event_id));
        let count: u64 = self.query("EXISTS", cmd).await?;
        Ok(count > 0)
    }

    /// Remembers that `endpoint` acknowledged `event_id` (`SET NX EX`); `false` when it was
    /// remembered already (another replica delivered a copy at the same time).
    pub async fn record_delivered(
        &self,
        endpoint: &str,
        event_id: &str,
        at_ms: i64,
    ) -> LedgerResult<bool> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.key(endpoint, event_id))
            .arg(format!("{}/{at_ms}", self.owner))
            .arg("NX")
            .arg("EX")
            .arg(self.settings.ttl.as_secs().max(1));
        let answer: Option<String> = self.query("SET", cmd).await?;
        Ok(answer.is_some())
    }

    /// The key of one delivery: `<prefix><endpoint>:<event id>`.
    pub fn key(&self, endpoint: &str, event_id: &str) -> String {
        key(&self.settings.key_prefix, endpoint, event_id)
    }

    async fn query<T: redis::FromRedisValue>(
        &self,
        op: &'static str,
        cmd: redis::Cmd,
    ) -> LedgerResult<T> {
        let mut conn = self.conn.clone();
        bounded(op, self.settings.timeout, async move {
            cmd.query_async::<T>(&mut conn).await
        })
        .await
    }
}

/// `<prefix><length of the endpoint id>:<endpoint id>:<event id>`: the length makes the
/// split unambiguous, so ids that contain `:` cannot make two deliveries share a key (one
/// event suppressing another's delivery).
fn key(prefix: &str, endpoint: &str, event_id: &str) -> String {
    format!("{prefix}{}:{endpoint}:{event_id}", endpoint.len())
}

/// Runs a Redis call within `after`.
async fn bounded<T>(
    op: &'static str,
    after: Duration,
    call: impl Future<Output = redis::RedisResult<T>>,
) -> LedgerResult<T> {
    match tokio::time::timeout(after, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(source)) => Err(LedgerError::Redis { op, source }),
        Err(_) => Err(LedgerError::Timeout { op, after }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str) -> RedisSettings {
        RedisSettings {
            redis_url: url.to_owned(),
            ttl: Duration::from_secs(60),
            key_prefix: "hookline:delivered:".to_owned(),
            timeout: Duration::from_millis(200),
        }
    }

    #[test]
    fn keys_join_prefix_endpoint_and_event() {
        assert_eq!(
            key("hookline:delivered:", "ep-1", "evt-9"),
            "hookline:delivered:4:ep-1:evt-9"
        );
    }

    #[test]
    fn ids_with_colons_never_share_a_key() {
        // Before: both were `p:a:b:c`, so delivering one suppressed the other.
        assert_ne!(key("p:", "a:b", "c"), key("p:", "a", "b:c"));
        assert_ne!(key("p:", "a", ":b"), key("p:", "a:", "b"));
    }

    #[tokio::test]
    async fn an_unreachable_redis_fails_within_the_timeout() {
        // A port nothing listens on: bound, then released.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let started = std::time::Instant::now();
        let error = RedisLedger::connect(&settings(&format!("redis://127.0.0.1:{port}")), "test")
            .await
            .expect_err("nothing listens");
        assert_eq!(error.op(), "connect");
        assert!(started.elapsed() < Duration::from_secs(2), "{error}");
    }
}
