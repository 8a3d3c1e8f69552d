//! A `redis-server` of the test's own on a free loopback port, without persistence
//! (`deploy/setup` installs Debian's `redis-server`), for the delivery ledger's and the
//! receiver's tests.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::wait_until;

/// Stopped when dropped.
pub struct RedisServer {
    /// Its loopback port.
    pub port: u16,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts one on a free port and waits until it answers PING.
    pub async fn start() -> RedisServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free loopback port")
            .port();
        let mut server = RedisServer { port, child: None };
        server.restart().await;
        server
    }

    /// Starts it (again) on its port and waits until it answers PING.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => panic!(
                "redis-server is not on PATH: run `deploy/setup` (it installs the Debian \
                 package redis-server) and try again"
            ),
            Err(error) => panic!("starting redis-server: {error}"),
        };
        self.child = Some(child);
        let url = self.url();
        wait_until(
            Duration::from_secs(10),
            "redis-server to answer PING",
            || {
                let url = url.clone();
                async move { ping(&url).await.then_some(()) }
            },
        )
        .await;
    }

    /// Kills it (as a crash would) and waits until it is gone.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Runs one command on a fresh connection.
    pub async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        let client = redis::Client::open(self.url()).expect("a Redis URL");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the test's redis-server");
        cmd.query_async(&mut conn).await.expect("a Redis answer")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn ping(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    let attempt = async {
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), attempt).await,
        Ok(Some(answer)) if answer == "PONG"
    )
}
