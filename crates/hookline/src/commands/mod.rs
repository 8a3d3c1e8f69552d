//! The subcommands, one file each, and the options they share.

mod console;
mod deadline;
mod demo;
mod dispatch;
mod dlq;
mod endpoint_credentials;
mod endpoints;
mod events;
mod outbox;
mod publish;
mod topics;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use hookline_core::secret::Secret;
use hookline_core::url_guard::redact_url;
use hookline_kafka::{KafkaSettings, Registry, RegistrySettings};
use hookline_producer::{DEFAULT_ENDPOINTS_TOPIC, DEFAULT_EVENTS_TOPIC, Topics};
use tracing_subscriber::EnvFilter;

/// Reliable webhook delivery on Apache Kafka.
#[derive(Debug, Parser)]
#[command(name = "hookline", version)]
pub struct Cli {
    /// Options every subcommand takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Publish webhook events to the events topic.
    Publish(publish::PublishArgs),
    /// Provision hookline's topics.
    Topics(topics::TopicsArgs),
    /// Manage the endpoint table.
    Endpoints(endpoints::EndpointsArgs),
    /// Run a dispatcher (one replica of the consumer group), with the fan-out stage unless
    /// `--no-fanout`, until SIGTERM or SIGINT.
    Dispatch(dispatch::DispatchArgs),
    /// Run the fan-out stage alone: tenant events become one delivery per subscribed
    /// endpoint (same config as `dispatch`).
    Fanout(dispatch::DispatchArgs),
    /// Inspect, redrive, resolve and archive the dead-letter topic.
    Dlq(dlq::DlqArgs),
    /// Show deliveries, retries and the DLQ on the local stack with a scripted receiver.
    Demo(demo::DemoArgs),
    /// One event's history from the attempt log (`show`), follow it live (`tail`), or stop
    /// it (`cancel`: the event, or its delivery to one endpoint).
    Events(events::EventsArgs),
    /// The transactional outbox: run its relay, migrate its table, show its state, retry
    /// its failed tasks.
    Outbox(outbox::OutboxArgs),
    /// Serve the operator console (the DLQ, event history and endpoints on a web page, with
    /// roles and an audit trail) until SIGTERM or SIGINT; `hash-token` hashes a login token.
    Console(console::ConsoleArgs),
}

impl Cli {
    /// Runs the chosen subcommand.
    pub async fn run(self) -> anyhow::Result<()> {
        let context = self.global.context()?;
        match self.command {
            Command::Publish(args) => publish::run(args, &context).await,
            Command::Topics(args) => topics::run(args, &context).await,
            Command::Endpoints(args) => endpoints::run(args, &context).await,
            Command::Dispatch(args) => {
                dispatch::run(args, &context, dispatch::Role::Dispatch).await
            }
            Command::Fanout(args) => dispatch::run(args, &context, dispatch::Role::Fanout).await,
            Command::Dlq(args) => dlq::run(args, &context).await,
            Command::Demo(args) => demo::run(args, &context).await,
            Command::Events(args) => events::run(args, &context).await,
            Command::Outbox(args) => outbox::run(args, &context).await,
            Command::Console(args) => console::run(args, &context).await,
        }
    }
}

/// How log lines are written (to stderr).
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Options shared by every subcommand.
#[derive(Debug, clap::Args)]
pub struct GlobalArgs {
    /// Kafka brokers, as a comma-separated host:port list.
    #[arg(
        long,
        global = true,
        env = "HOOKLINE_BOOTSTRAP_SERVERS",
        default_value = "127.0.0.1:9092"
    )]
    bootstrap_servers: String,
    /// Extra librdkafka property for every Kafka client (security, tuning); repeatable.
    /// A value may be `${env:NAME}` or `${file:PATH}`, so that a secret stays out of the
    /// process list. Properties hookline sets itself (acks, group.id...) are refused.
    #[arg(long = "kafka-property", global = true, value_name = "KEY=VALUE", value_parser = parse_key_value)]
    kafka_properties: Vec<(String, String)>,
    /// Base URL of the schema registry's Confluent-compatible API.
    #[arg(
        long,
        global = true,
        env = "HOOKLINE_REGISTRY_URL",
        default_value = "http://127.0.0.1:8081/apis/ccompat/v7"
    )]
    registry_url: String,
    /// User name for the registry's HTTP basic authentication (with --registry-password).
    #[arg(long, global = true, env = "HOOKLINE_REGISTRY_USERNAME")]
    registry_username: Option<String>,
    /// Password for the registry's basic authentication, or a reference to it:
    /// `${env:NAME}` or `${file:PATH}` (better than a value in clear on the command line).
    #[arg(
        long,
        global = true,
        env = "HOOKLINE_REGISTRY_PASSWORD",
        hide_env_values = true,
        value_name = "PASSWORD",
        value_parser = Secret::resolve
    )]
    registry_password: Option<Secret>,
    /// Bearer token for the registry (instead of basic authentication), or a reference to
    /// it: `${env:NAME}` or `${file:PATH}`.
    #[arg(
        long,
        global = true,
        env = "HOOKLINE_REGISTRY_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        value_parser = Secret::resolve
    )]
    registry_token: Option<Secret>,
    /// A PEM file of extra root certificates to trust for an https registry (a private CA).
    #[arg(
        long,
        global = true,
        env = "HOOKLINE_REGISTRY_CA_FILE",
        value_name = "PATH"
    )]
    registry_ca_file: Option<PathBuf>,
    /// The events topic; the retry, DLQ and action topics are named after it.
    #[arg(long, global = true, env = "HOOKLINE_EVENTS_TOPIC", default_value = DEFAULT_EVENTS_TOPIC)]
    events_topic: String,
    /// The compacted topic of endpoint configs.
    #[arg(long, global = true, env = "HOOKLINE_ENDPOINTS_TOPIC", default_value = DEFAULT_ENDPOINTS_TOPIC)]
    endpoints_topic: String,
    /// Format of log lines on stderr; RUST_LOG selects what is logged (default: warn).
    #[arg(long, global = true, env = "HOOKLINE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// What the subcommands are given: settings resolved from the global options.
#[derive(Debug)]
pub struct Context {
    /// How to reach Kafka.
    pub kafka: KafkaSettings,
    /// How to reach the schema registry.
    pub registry: RegistrySettings,
    /// The topic names.
    pub topics: Topics,
}

impl Context {
    /// A registry client (created on demand: not every command needs one).
    pub fn registry(&self) -> anyhow::Result<Arc<Registry>> {
        let registry = Registry::new(&self.registry).with_context(|| {
            format!(
                "connecting to the schema registry at {}",
                redact_url(&self.registry.url)
            )
        })?;
        Ok(Arc::new(registry))
    }
}

impl GlobalArgs {
    fn context(&self) -> anyhow::Result<Context> {
        if self.bootstrap_servers.trim().is_empty() {
            anyhow::bail!("--bootstrap-servers must not be empty");
        }
        let mut kafka = KafkaSettings::new(self.bootstrap_servers.trim());
        kafka
            .properties
            .extend(self.kafka_properties.iter().cloned());
        // Every command stops here, before making a client, on a property hookline's
        // guarantees depend on or a secret reference that does not resolve.
        kafka.validate().map_err(|error| {
            anyhow::anyhow!("--kafka-property {}: {}", error.property(), error.reason())
        })?;
        Ok(Context {
            kafka,
            registry: RegistrySettings {
                url: self.registry_url.clone(),
                username: self.registry_username.clone(),
                password: self.registry_password.clone(),
                token: self.registry_token.clone(),
                ca_file: self.registry_ca_file.clone(),
                ..RegistrySettings::default()
            },
            topics: Topics::new(&self.events_topic, &self.endpoints_topic),
        })
    }
}

/// Sets up logging to stderr, filtered by `RUST_LOG` (default `warn`). A panic, in any
/// thread or task, is logged as an error event too (in the chosen format, where a log
/// collector finds it), before the standard report.
pub fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    log_panics();
}

/// Makes every panic an error event (`panicked`, with its message and place) before the
/// standard report, which still follows.
fn log_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |panic| {
        tracing::error!(%panic, "panicked");
        report(panic);
    }));
}

/// An error and its causes on one line, outermost first; a cause whose text its parent
/// already ends with is not repeated.
pub fn error_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// The items of repeated, comma-separated flag values (`--types a,b --types c`), trimmed.
/// Empty items are kept, for the validation to refuse with the flag named.
pub fn comma_list(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(|item| item.trim().to_owned())
        .collect()
}

/// Reads `KEY=VALUE`.
pub fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.to_owned()))
        }
        _ => Err(format!("`{text}` is not KEY=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// A log writer into a shared buffer.
    struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let mut buffer = self
                .0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            buffer.extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_panic_is_logged_as_an_error_event_with_its_message_and_place() {
        let logged = std::sync::Arc::default();
        let writer = {
            let logged = std::sync::Arc::clone(&logged);
            move || Buffer(std::sync::Arc::clone(&logged))
        };
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_writer(writer)
            .finish();
        // The standard report is kept quiet here; the hook chains to whatever was set.
        let standard = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        log_panics();
        let caught = tracing::subscriber::with_default(subscriber, || {
            std::panic::catch_unwind(|| panic!("the endpoint table is gone"))
        });
        drop(std::panic::take_hook());
        std::panic::set_hook(standard);
        assert!(caught.is_err());
        let text = String::from_utf8(
            logged
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone(),
        )
        .expect("UTF-8 logs");
        let line = text.lines().next().expect("one event logged");
        let event: serde_json::Value = serde_json::from_str(line).expect("a JSON event");
        assert_eq!(event["level"], "ERROR", "{line}");
        assert_eq!(event["fields"]["message"], "panicked", "{line}");
        let panic = event["fields"]["panic"].as_str().unwrap_or_default();
        assert!(panic.contains("the endpoint table is gone"), "{line}");
        assert!(panic.contains("commands/mod.rs"), "the place: {line}");
    }

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn registry_flags_fill_the_registry_settings_and_never_show_the_secrets() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("password");
        std::fs::write(&file, "cli-pa55-7d2e\n").expect("write");
        let reference = format!("${{file:{}}}", file.display());
        let cli = Cli::try_parse_from([
            "hookline",
            "--registry-url",
            "https://registry.internal/apis/ccompat/v7",
            "--registry-username",
            "hookline",
            "--registry-password",
            &reference,
            "--registry-ca-file",
            "/etc/hookline/ca.pem",
            "topics",
            "create",
        ])
        .expect("the flags parse");
        let context = cli.global.context().expect("a context");
        let registry = &context.registry;
        assert_eq!(registry.username.as_deref(), Some("hookline"));
        assert_eq!(
            registry.password.as_ref().map(Secret::expose),
            Some("cli-pa55-7d2e")
        );
        assert_eq!(
            registry.ca_file.as_deref(),
            Some(std::path::Path::new("/etc/hookline/ca.pem"))
        );
        let shown = format!("{cli:?} {context:?}");
        assert!(!shown.contains("cli-pa55-7d2e"), "{shown}");

        let token = Cli::try_parse_from([
            "hookline",
            "--registry-token",
            "tok-19ab",
            "topics",
            "create",
        ])
        .expect("the flags parse");
        let context = token.global.context().expect("a context");
        assert_eq!(
            context.registry.token.as_ref().map(Secret::expose),
            Some("tok-19ab")
        );
        assert!(!format!("{token:?}").contains("tok-19ab"));
    }

    #[test]
    fn comma_lists() {
        let given = ["invoice.*, customer.created".to_owned(), "x".to_owned()];
        assert_eq!(comma_list(&given), ["invoice.*", "customer.created", "x"]);
        assert_eq!(comma_list(&["a,,b".to_owned()]), ["a", "", "b"]);
        assert!(comma_list(&[]).is_empty());
    }

    #[test]
    fn key_values() {
        assert_eq!(parse_key_value("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert_eq!(parse_key_value("a="), Ok(("a".into(), String::new())));
        assert!(parse_key_value("=b").is_err());
        assert!(parse_key_value("ab").is_err());
    }

    #[test]
    fn error_lines_do_not_repeat_causes() {
        #[derive(Debug, thiserror::Error)]
        #[error("inner problem")]
        struct Inner;
        #[derive(Debug, thiserror::Error)]
        #[error("outer: {0}")]
        struct Repeats(#[source] Inner);
        let error = anyhow::Error::new(Repeats(Inner)).context("doing it");
        assert_eq!(error_line(&error), "doing it: outer: inner problem");
        let error = anyhow::Error::new(Inner).context("doing it");
        assert_eq!(error_line(&error), "doing it: inner problem");
    }
}
