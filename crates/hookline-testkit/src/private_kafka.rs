//! A Kafka broker of a test's own (`deploy/local/stack` with a private data dir and
//! ports), to stop and start without touching the shared broker; stopped on drop.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hookline_kafka::KafkaSettings;

/// A private broker, PLAINTEXT on `127.0.0.1:<port>`.
#[derive(Debug)]
pub struct PrivateKafka {
    /// Removed on drop, after the broker is stopped.
    dir: tempfile::TempDir,
    kafka_port: u16,
    controller_port: u16,
    secure_port: u16,
}

impl PrivateKafka {
    /// Formats and starts a broker in a fresh temporary data dir on free ports, and waits
    /// until it answers (the stack's own readiness check).
    pub async fn start() -> PrivateKafka {
        let dir = tempfile::Builder::new()
            .prefix("hookline-private-kafka-")
            .tempdir()
            .expect("the private broker's data dir");
        let [kafka_port, controller_port, secure_port] = free_ports();
        let kafka = PrivateKafka {
            dir,
            kafka_port,
            controller_port,
            secure_port,
        };
        kafka.stack(&["start", "kafka"]).await;
        kafka
    }

    /// `127.0.0.1:<port>`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.kafka_port)
    }

    /// Client settings for this broker.
    pub fn settings(&self) -> KafkaSettings {
        KafkaSettings::new(self.bootstrap())
    }

    /// Stops the broker (SIGTERM, waits until it exited).
    pub async fn stop(&self) {
        self.stack(&["stop", "kafka"]).await;
    }

    /// Starts the broker again, waits until it answers.
    pub async fn resume(&self) {
        self.stack(&["start", "kafka"]).await;
    }

    async fn stack(&self, args: &[&str]) {
        let mut command = tokio::process::Command::from(self.command(args));
        let output = command.output().await.expect("deploy/local/stack runs");
        assert!(
            output.status.success(),
            "deploy/local/stack {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(stack_script());
        command
            .args(args)
            .env("HOOKLINE_DATA_DIR", self.dir.path())
            .env("HOOKLINE_KAFKA_PORT", self.kafka_port.to_string())
            .env("HOOKLINE_CONTROLLER_PORT", self.controller_port.to_string())
            .env("HOOKLINE_KAFKA_SECURE_PORT", self.secure_port.to_string())
            .env("HOOKLINE_POSTGRES", "0")
            .env("HOOKLINE_STACK_QUIET", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }
}

impl Drop for PrivateKafka {
    fn drop(&mut self) {
        let stopped = self.command(&["down"]).output();
        if let Err(error) = stopped {
            eprintln!(
                "stopping the private broker in {}: {error}",
                self.dir.path().display()
            );
        }
    }
}

fn stack_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/local/stack")
}

/// Three ports free now (bound together, so distinct, then released).
fn free_ports() -> [u16; 3] {
    let listeners: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    let port = |i: usize| listeners[i].local_addr().expect("its address").port();
    [port(0), port(1), port(2)]
}
