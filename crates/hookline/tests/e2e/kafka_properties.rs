//! Every command stops at start-up, naming the property, when `--kafka-property` or the
//! dispatcher's `kafka.properties` would override a property hookline's guarantees depend
//! on, or when a secret reference does not resolve.

use std::process::{Output, Stdio};
use std::time::Duration;

use hookline_testkit::{kafka_settings, registry_settings};
use tokio::process::Command;

const DEADLINE: Duration = Duration::from_secs(30);

async fn hookline(args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(["--bootstrap-servers", &kafka_settings().bootstrap_servers])
        .args(["--registry-url", &registry_settings().url])
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the hookline binary starts");
    tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .expect("hookline stops before the deadline")
        .expect("hookline output")
}

fn refused(output: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !output.status.success(),
        "{what} should be refused: {stderr}"
    );
    stderr
}

#[tokio::test]
async fn dispatch_refuses_overrides_of_its_guarantees() {
    let output = hookline(&["--kafka-property", "enable.auto.commit=false", "dispatch"]).await;
    let stderr = refused(&output, "enable.auto.commit");
    assert!(stderr.contains("enable.auto.commit"), "{stderr}");
    assert!(stderr.contains("cannot be set"), "{stderr}");

    // The same in the dispatcher's own config file.
    let config = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("a config file");
    std::fs::write(
        config.path(),
        "[kafka.properties]\n\"isolation.level\" = \"read_uncommitted\"\n",
    )
    .expect("write config");
    let path = config.path().to_string_lossy().into_owned();
    let output = hookline(&["dispatch", "--config", &path]).await;
    let stderr = refused(&output, "isolation.level");
    assert!(
        stderr.contains("kafka.properties.isolation.level"),
        "{stderr}"
    );
}

#[tokio::test]
async fn publish_refuses_acks_and_unresolved_secrets() {
    let output = hookline(&["--kafka-property", "acks=1", "publish", "--data", "{}"]).await;
    let stderr = refused(&output, "acks");
    assert!(stderr.contains("--kafka-property acks"), "{stderr}");

    let output = hookline(&[
        "--kafka-property",
        "sasl.password=${env:HOOKLINE_NO_SUCH_VARIABLE_P3}",
        "publish",
        "--data",
        "{}",
    ])
    .await;
    let stderr = refused(&output, "an unset variable");
    assert!(stderr.contains("sasl.password"), "{stderr}");
    assert!(stderr.contains("HOOKLINE_NO_SUCH_VARIABLE_P3"), "{stderr}");
}
