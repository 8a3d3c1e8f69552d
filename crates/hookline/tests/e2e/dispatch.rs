//! End-to-end tests of `hookline dispatch` as separate processes against the real local
//! stack: replicas in one group share the partitions, and stopping one (SIGTERM) or killing
//! one (SIGKILL) mid-stream loses no event.

use std::collections::HashSet;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use hookline_testkit::{
    Receiver, Reply, TestTopics, kafka_settings, registry_settings, unique_name, wait_until,
};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::process::{Child, Command};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DEADLINE: Duration = Duration::from_secs(90);

/// Starts `hookline dispatch` with `config`, logging to `<dir>/<name>.log`.
pub(crate) fn dispatcher(name: &str, topics: &TestTopics, config: &Path, dir: &Path) -> Child {
    dispatcher_under(&[], name, topics, config, dir)
}

/// As [`dispatcher`], run through `wrapper` (a program and its arguments, such as
/// `prlimit --as=...`, that execs the rest of its command line) when it is not empty.
pub(crate) fn dispatcher_under(
    wrapper: &[&str],
    name: &str,
    topics: &TestTopics,
    config: &Path,
    dir: &Path,
) -> Child {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file");
    let hookline = env!("CARGO_BIN_EXE_hookline");
    let mut command = match wrapper.split_first() {
        Some((program, args)) => {
            let mut command = Command::new(program);
            command.args(args).arg(hookline);
            command
        }
        None => Command::new(hookline),
    };
    command
        .args(["--bootstrap-servers", &kafka_settings().bootstrap_servers])
        .args(["--registry-url", &registry_settings().url])
        .args([
            "--events-topic",
            &topics.events,
            "--endpoints-topic",
            &topics.endpoints,
        ])
        .arg("dispatch")
        .arg("--config")
        .arg(config)
        .env("HOOKLINE_HTTP__USER_AGENT", name)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("hookline dispatch (and its wrapper) starts")
}

/// Sends SIGTERM to `child` and waits (at most 30 s, its grace period) for it to exit.
pub(crate) async fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let pid = child.id().expect("a running process").to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .expect("kill");
    assert!(status.success(), "kill -TERM {pid}");
    tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("it exits within its grace period")
        .expect("exit status")
}

fn agents(receiver: &Receiver) -> HashSet<String> {
    receiver
        .received("ok")
        .iter()
        .filter_map(|r| r.header("user-agent").map(str::to_owned))
        .collect()
}

fn delivered_ids(receiver: &Receiver) -> HashSet<String> {
    receiver
        .received("ok")
        .iter()
        .filter(|r| {
            r.reply
                == Reply::Slow {
                    delay_ms: 50,
                    status: 200,
                }
        })
        .filter_map(|r| r.header("webhook-id").map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_share_the_partitions_and_stopping_or_killing_one_loses_nothing() {
    let kafka = kafka_settings();
    let topics = TestTopics::new("replicas", &["200ms", "500ms", "1s"]);
    topics.create(&kafka, 4).await;
    let receiver = Receiver::start().await;
    let url = receiver.script("ok", |_| Reply::Slow {
        delay_ms: 50,
        status: 200,
    });
    let producer: FutureProducer = kafka.producer_config().create().expect("producer");
    let endpoint = serde_json::json!({ "url": url, "secrets": [SECRET] }).to_string();
    producer
        .send(
            FutureRecord::to(&topics.endpoints)
                .key("ep-ok")
                .payload(&endpoint),
            DEADLINE,
        )
        .await
        .expect("endpoint written");

    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("dispatcher.toml");
    let tiers = topics.tiers_toml();
    std::fs::write(
        &config,
        format!(
            r#"group_id = "{group}"
shutdown_grace_ms = 5000
session_timeout_ms = 6000

[topics]
retry_tiers = [{tiers}]

[retry]
base_ms = 200
cap_ms = 1000

[outbound]
allow_loopback = true

[concurrency]
per_endpoint = 4

[admin]
listen = "127.0.0.1:0"
"#,
            group = unique_name("replicas-group"),
        ),
    )
    .expect("config file");

    let mut first = dispatcher("replica-a", &topics, &config, dir.path());
    let mut second = dispatcher("replica-b", &topics, &config, dir.path());

    let publish = |from: usize, to: usize| {
        let producer = producer.clone();
        let topic = topics.events.clone();
        async move {
            let mut ids = Vec::new();
            for n in from..to {
                let id = format!("evt-{n}-{}", unique_name("r"));
                let key = format!("ep-ok-{}", n % 8);
                let value = serde_json::json!({
                    "event_id": id, "event_type": "order.created", "endpoint_id": "ep-ok",
                    "payload": { "n": n },
                })
                .to_string();
                // Keys vary so the events spread over all partitions.
                producer
                    .send(FutureRecord::to(&topic).key(&key).payload(&value), DEADLINE)
                    .await
                    .expect("event written");
                ids.push(id);
            }
            ids
        }
    };

    let mut expected: HashSet<String> = publish(0, 200).await.into_iter().collect();
    // On a busy machine the second replica can join after the first has delivered all of
    // them: publish more, a few at a time, until both have delivered some.
    let started = std::time::Instant::now();
    let mut next = 1_000;
    while agents(&receiver).len() < 2 {
        assert!(
            started.elapsed() < DEADLINE,
            "timed out after {DEADLINE:?} waiting for both replicas delivering (agents: {:?})",
            agents(&receiver)
        );
        let before = receiver.count("ok");
        expected.extend(publish(next, next + 20).await);
        next += 20;
        wait_until(DEADLINE, "the newest events delivered", || async {
            (receiver.count("ok") >= before + 20).then_some(())
        })
        .await;
    }

    // SIGTERM the first mid-stream: it drains, commits and exits 0.
    assert!(
        terminate(&mut first).await.success(),
        "graceful stop exits 0"
    );

    let before = receiver.count("ok");
    expected.extend(publish(200, 400).await);
    wait_until(DEADLINE, "the remaining replica to take over", || async {
        (receiver.count("ok") > before + 20).then_some(())
    })
    .await;

    // SIGKILL the second mid-stream, with no chance to commit, and start a third.
    second.start_kill().expect("kill -9");
    second.wait().await.expect("killed");
    expected.extend(publish(400, 500).await);
    let mut third = dispatcher("replica-c", &topics, &config, dir.path());

    wait_until(DEADLINE, "every event delivered at least once", || async {
        let delivered = delivered_ids(&receiver);
        expected
            .iter()
            .all(|id| delivered.contains(id))
            .then_some(())
    })
    .await;
    // Every event published is distinct: 500, and those published until both delivered.
    assert_eq!(expected.len(), 500 + (next - 1_000));

    assert!(terminate(&mut third).await.success());
}

/// Runs `hookline dispatch` with `env` and returns its exit status and stderr.
async fn dispatch_with(env: &[(&str, &str)], args: &[&str]) -> (std::process::ExitStatus, String) {
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        Command::new(env!("CARGO_BIN_EXE_hookline"))
            .arg("dispatch")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("a bad configuration stops start-up at once")
    .expect("hookline runs");
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_bad_configuration_stops_start_up_with_a_message_naming_the_field() {
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[("HOOKLINE_RETRY__MAX_ATTEMPS", "3")], "max_attemps"),
        (&[("HOOKLINE_RETRY__BASE_MS", "0")], "retry.base_ms"),
        (&[("HOOKLINE_HTTP__TIMEOUT_MS", "soon")], "TIMEOUT_MS"),
        (
            &[
                ("HOOKLINE_OPERATOR_WEBHOOKS__ENDPOINT_ID", "ep-ops"),
                ("HOOKLINE_OPERATOR_WEBHOOKS__MAX_PER_MINUTE", "0"),
            ],
            "operator_webhooks.max_per_minute",
        ),
    ];
    for (env, field) in cases {
        let (status, stderr) = dispatch_with(env, &[]).await;
        assert!(!status.success(), "{env:?} was accepted");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(stderr.contains(field), "{env:?}: {stderr}");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("dispatcher.toml");
    std::fs::write(&file, "[topics]\nretry_tiers = [\"5 seconds\"]\n").expect("write");
    let (status, stderr) = dispatch_with(&[], &["--config", file.to_str().expect("utf-8")]).await;
    assert!(!status.success());
    assert!(stderr.contains("topics.retry_tiers"), "{stderr}");
}
