//! Where the local stack is, and names that keep tests apart.

use std::path::PathBuf;

use hookline_kafka::{KafkaSettings, RegistrySettings};

/// The local broker, or `HOOKLINE_TEST_BOOTSTRAP` when set.
pub fn kafka_settings() -> KafkaSettings {
    KafkaSettings::new(
        std::env::var("HOOKLINE_TEST_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".to_owned()),
    )
}

/// The local registry's Confluent-compatible API, or `HOOKLINE_TEST_REGISTRY` when set.
pub fn registry_settings() -> RegistrySettings {
    RegistrySettings {
        url: std::env::var("HOOKLINE_TEST_REGISTRY")
            .unwrap_or_else(|_| "http://127.0.0.1:8081/apis/ccompat/v7".to_owned()),
        ..RegistrySettings::default()
    }
}

/// A topic, group or subject name no other test (or run) uses. Under `deploy/test` it
/// carries the run's id (`HOOKLINE_TEST_RUN`), `t-<run>-<prefix>-<uuid>`, so that the run
/// deletes its own topics when it ends and leaves another run's alone.
pub fn unique_name(prefix: &str) -> String {
    let id = uuid::Uuid::new_v4().simple();
    match test_run() {
        Some(run) => format!("t-{run}-{prefix}-{id}"),
        None => format!("t-{prefix}-{id}"),
    }
}

/// `HOOKLINE_TEST_RUN` when it is a short lower-case alphanumeric id, else none.
fn test_run() -> Option<String> {
    let run = std::env::var("HOOKLINE_TEST_RUN").ok()?;
    let valid = !run.is_empty()
        && run.len() <= 16
        && run
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    valid.then_some(run)
}

/// The URL of the stack's PostgreSQL (database and user `hookline`):
/// `HOOKLINE_TEST_POSTGRES` (deploy/test sets it), else the stack's port
/// (`HOOKLINE_POSTGRES_PORT`, default 5433) and its password file. With neither, the test
/// fails saying how to start it (it does not skip).
pub fn postgres_url() -> String {
    if let Ok(url) = std::env::var("HOOKLINE_TEST_POSTGRES") {
        return url;
    }
    let file = stack_data_dir().join("postgres.password");
    let password = std::fs::read_to_string(&file).unwrap_or_else(|error| {
        panic!(
            "no HOOKLINE_TEST_POSTGRES and no {} ({error}): start the local stack \
             (deploy/local/stack up)",
            file.display()
        )
    });
    let port = std::env::var("HOOKLINE_POSTGRES_PORT").unwrap_or_else(|_| "5433".to_owned());
    format!(
        "postgres://hookline:{}@127.0.0.1:{port}/hookline",
        password.trim()
    )
}

/// The stack's data dir, as `deploy/local/stack` derives it.
fn stack_data_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("HOOKLINE_DATA_DIR") {
        return PathBuf::from(dir);
    }
    let home = std::env::var("HOOKLINE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/hookline")
        });
    home.join("data")
}

/// A file of the secured listener: from `variable`, else the stack's `secure/<name>`.
/// Missing, the test fails saying how to get it (it does not skip).
fn stack_file(variable: &str, name: &str) -> PathBuf {
    let path = std::env::var(variable)
        .map(PathBuf::from)
        .unwrap_or_else(|_| stack_data_dir().join("secure").join(name));
    assert!(
        path.is_file(),
        "{} ({variable}) does not exist: start the local stack with its SASL_SSL listener \
         (`deploy/local/stack up`, or `deploy/local/stack restart kafka` for one started \
         before the listener existed), or set {variable}",
        path.display()
    );
    path
}

/// The stack's SASL_SSL listener (`HOOKLINE_TEST_SECURE_BOOTSTRAP`, by default port
/// `HOOKLINE_KAFKA_SECURE_PORT` or 9094).
pub fn secure_bootstrap() -> String {
    let port = std::env::var("HOOKLINE_KAFKA_SECURE_PORT").unwrap_or_else(|_| "9094".to_owned());
    std::env::var("HOOKLINE_TEST_SECURE_BOOTSTRAP").unwrap_or_else(|_| format!("127.0.0.1:{port}"))
}

/// The CA file of the secured listener (`HOOKLINE_TEST_KAFKA_CA`).
pub fn secure_ca_file() -> PathBuf {
    stack_file("HOOKLINE_TEST_KAFKA_CA", "ca.pem")
}

/// The SCRAM user's password file (`HOOKLINE_TEST_KAFKA_PASSWORD_FILE`).
pub fn secure_password_file() -> PathBuf {
    stack_file("HOOKLINE_TEST_KAFKA_PASSWORD_FILE", "hookline.password")
}

/// The librdkafka properties for the SASL_SSL listener with `password` (a value or a
/// reference), user `hookline`, SCRAM-SHA-512 and the stack's CA.
pub fn secure_properties(password: &str) -> Vec<(String, String)> {
    let ca = secure_ca_file().to_string_lossy().into_owned();
    [
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.username", "hookline"),
        ("sasl.password", password),
        ("ssl.ca.location", ca.as_str()),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect()
}

/// Settings for the SASL_SSL listener with `password` (a value or a reference).
pub fn secure_kafka_settings(password: &str) -> KafkaSettings {
    let mut settings = KafkaSettings::new(secure_bootstrap());
    settings.properties.extend(secure_properties(password));
    settings
}
