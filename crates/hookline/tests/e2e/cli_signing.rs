//! End-to-end tests of `hookline endpoints put`'s signing options against the real local
//! stack: a generated signing key's public key, printed once, verifies a signature made with
//! the key stored in the endpoint table; rotation adds and removes keys by public key; secrets
//! come from an environment reference or a file, never from the command line in clear.

use std::process::{Output, Stdio};
use std::time::Duration;

use hookline_core::endpoint::EndpointConfig;
use hookline_core::signing::{SigningKey, VerifyingKey, verify_v1a};
use hookline_testkit::{kafka_settings, read_all, registry_settings, unique_name};
use rdkafka::message::Message;
use tokio::process::Command;

const DEADLINE: Duration = Duration::from_secs(30);
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SECRET_VAR: &str = "HOOKLINE_E2E_ENDPOINT_SECRET";

/// Runs the binary against the local stack with `args` and `SECRET` in `SECRET_VAR`.
async fn hookline(args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_hookline"))
        .arg("--bootstrap-servers")
        .arg(kafka_settings().bootstrap_servers)
        .arg("--registry-url")
        .arg(registry_settings().url)
        .args(args)
        .env_remove("RUST_LOG")
        .env(SECRET_VAR, SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the hookline binary starts");
    tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .expect("hookline finishes before the deadline")
        .expect("hookline output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `whpk_` public key a `put --generate-signing-key` printed.
fn printed_public_key(stdout: &str) -> VerifyingKey {
    let line = stdout
        .lines()
        .find(|line| line.starts_with("generated signing key; public key whpk_"))
        .unwrap_or_else(|| panic!("no public key printed: {stdout}"));
    let word = line
        .split_whitespace()
        .find(|word| word.starts_with("whpk_"))
        .unwrap_or_default();
    VerifyingKey::parse(word).expect("a valid whpk_")
}

/// The last config of `id` written to `topic`, one of `count` records.
async fn stored(topic: &str, count: usize, id: &str) -> EndpointConfig {
    let records = read_all(&kafka_settings(), topic, count, DEADLINE).await;
    let value = records
        .iter()
        .rev()
        .find(|r| r.key() == Some(id.as_bytes()))
        .and_then(|r| r.payload())
        .expect("the endpoint record");
    EndpointConfig::from_json(value).expect("a valid stored config")
}

#[tokio::test]
async fn a_generated_signing_keys_printed_public_key_verifies_the_stored_key() {
    let topic = unique_name("cli-signing");
    let table = ["--endpoints-topic", topic.as_str()];
    let run = |args: &[&str]| {
        let all: Vec<String> = table.iter().chain(args).map(|a| a.to_string()).collect();
        async move {
            let all: Vec<&str> = all.iter().map(String::as_str).collect();
            hookline(&all).await
        }
    };
    let create = run(&["topics", "create", "--partitions", "1"]).await;
    assert!(create.status.success(), "{}", text(&create.stderr));

    let env_ref = format!("${{env:{SECRET_VAR}}}");
    let put = run(&[
        "endpoints",
        "put",
        "ep_k",
        "--url",
        "https://k.example/hook",
        "--secret",
        &env_ref,
        "--generate-signing-key",
    ])
    .await;
    let stdout = text(&put.stdout);
    assert!(put.status.success(), "{}", text(&put.stderr));
    assert!(stdout.contains("(1 secret, 1 signing key)"), "{stdout}");
    assert!(
        !stdout.contains("whsk_") && !stdout.contains(SECRET),
        "{stdout}"
    );
    assert!(
        !text(&put.stderr).contains("in clear"),
        "{}",
        text(&put.stderr)
    );
    let first = printed_public_key(&stdout);

    // The stored key signs; the printed public key verifies; the secret came from the env.
    let config = stored(&topic, 1, "ep_k").await;
    assert_eq!(config.secrets, [SECRET]);
    assert_eq!(config.signing_keys.len(), 1);
    let key = SigningKey::parse(&config.signing_keys[0]).expect("a whsk_");
    let body = br#"{"invoice":"in_1"}"#;
    let signature = key.sign("msg_e2e", 1_700_000_000, body);
    verify_v1a(&[first], "msg_e2e", 1_700_000_000, body, &signature).expect("verifies");
    assert!(verify_v1a(&[first], "msg_e2e", 1_700_000_000, b"{}", &signature).is_err());

    // Rotation: a second generated key is added beside the first; the secret now from a file.
    let dir = tempfile::tempdir().expect("temp dir");
    let secret_file = dir.path().join("secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).expect("write the secret file");
    let secret_path = secret_file.display().to_string();
    let rotate = run(&[
        "endpoints",
        "put",
        "ep_k",
        "--url",
        "https://k.example/hook",
        "--secret-file",
        &secret_path,
        "--generate-signing-key",
    ])
    .await;
    assert!(rotate.status.success(), "{}", text(&rotate.stderr));
    let second = printed_public_key(&text(&rotate.stdout));
    assert_ne!(second, first);
    let list = run(&["endpoints", "list"]).await;
    let listed = text(&list.stdout);
    assert!(list.status.success(), "{}", text(&list.stderr));
    assert!(
        listed.contains(&first.to_whpk()) && listed.contains(&second.to_whpk()),
        "{listed}"
    );
    assert!(!listed.contains("whsk_"), "{listed}");

    // Retiring the first key leaves the second, also in the JSON listing.
    let first_whpk = first.to_whpk();
    let retire = run(&[
        "endpoints",
        "put",
        "ep_k",
        "--url",
        "https://k.example/hook",
        "--remove-signing-key",
        &first_whpk,
    ])
    .await;
    assert!(retire.status.success(), "{}", text(&retire.stderr));
    assert!(text(&retire.stdout).contains("(0 secrets, 1 signing key)"));
    let json = run(&["endpoints", "list", "--output", "json"]).await;
    assert!(!text(&json.stdout).contains("whsk_"));
    let parsed: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON output");
    assert_eq!(
        parsed[0]["public_keys"],
        serde_json::json!([second.to_whpk()])
    );
    let config = stored(&topic, 3, "ep_k").await;
    let kept = SigningKey::parse(&config.signing_keys[0]).expect("a whsk_");
    assert_eq!(kept.public_key(), second);

    // A secret given in clear is taken, with a warning that never shows it.
    let clear = run(&[
        "endpoints",
        "put",
        "ep_c",
        "--url",
        "https://c.example/hook",
        "--secret",
        SECRET,
    ])
    .await;
    let stderr = text(&clear.stderr);
    assert!(clear.status.success(), "{stderr}");
    assert!(
        stderr.contains("process list") && !stderr.contains(SECRET),
        "{stderr}"
    );
}
