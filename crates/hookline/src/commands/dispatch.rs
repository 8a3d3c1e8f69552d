//! `hookline dispatch`: run a dispatcher (with the fan-out stage, unless disabled) until
//! SIGTERM or SIGINT, then drain and exit 0; `hookline fanout`: the fan-out stage alone.

use std::path::PathBuf;

use anyhow::Context as _;
use hookline_dispatcher::DispatcherConfig;
use hookline_kafka::RegistrySettings;
use hookline_producer::DEFAULT_EVENTS_TOPIC;
use tokio_util::sync::CancellationToken;

use super::Context;

/// Options of `hookline dispatch`.
#[derive(Debug, clap::Args)]
pub struct DispatchArgs {
    /// A TOML config file; `HOOKLINE_<SECTION>__<KEY>` variables override it
    /// (e.g. `HOOKLINE_RETRY__MAX_ATTEMPTS=5`).
    #[arg(long, env = "HOOKLINE_CONFIG")]
    config: Option<PathBuf>,
    /// A static endpoints file (TOML or JSON), besides the endpoints topic.
    #[arg(long)]
    endpoints_file: Option<PathBuf>,
    /// Where the admin port (/healthz, /readyz, /metrics) listens; empty to disable.
    #[arg(long)]
    admin_listen: Option<String>,
    /// The consumer group (shared by all replicas).
    #[arg(long)]
    group_id: Option<String>,
    /// Allow delivering to loopback addresses (local testing only).
    #[arg(long)]
    allow_loopback: bool,
    /// Allow delivering to private (RFC 1918) addresses.
    #[arg(long)]
    allow_private: bool,
    /// Do not run the fan-out stage here (`fanout.enabled = false`): run `hookline fanout`
    /// apart instead.
    #[arg(long)]
    no_fanout: bool,
}

/// What a process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Deliveries, and the fan-out unless disabled.
    Dispatch,
    /// The fan-out stage alone.
    Fanout,
}

/// Runs the dispatcher (or the fan-out alone) until a signal asks it to stop.
pub async fn run(args: DispatchArgs, context: &Context, role: Role) -> anyhow::Result<()> {
    let mut config = DispatcherConfig::load(args.config.as_deref())
        .context("loading the dispatcher configuration")?;
    // Global options that were set (they differ from the defaults) win over the file.
    if context.kafka.bootstrap_servers != DispatcherConfig::default().kafka.bootstrap_servers {
        config.kafka.bootstrap_servers = context.kafka.bootstrap_servers.clone();
    }
    config
        .kafka
        .properties
        .extend(context.kafka.properties.clone());
    registry_options(&mut config.registry, &context.registry);
    if context.topics.events != DEFAULT_EVENTS_TOPIC {
        config.topics.events = context.topics.events.clone();
    }
    if context.topics.endpoints != DispatcherConfig::default().topics.endpoints {
        config.topics.endpoints = context.topics.endpoints.clone();
    }
    if let Some(path) = args.endpoints_file {
        config.endpoints_file = Some(path);
    }
    if let Some(listen) = args.admin_listen {
        config.admin.listen = listen;
    }
    if let Some(group) = args.group_id {
        config.group_id = group;
    }
    config.outbound.allow_loopback |= args.allow_loopback;
    config.outbound.allow_private |= args.allow_private;
    if args.no_fanout {
        config.fanout.enabled = false;
    }
    let settings = config
        .into_settings()
        .context("invalid dispatcher configuration")?;

    let shutdown = CancellationToken::new();
    let running = match role {
        Role::Dispatch => hookline_dispatcher::start(settings, shutdown.clone())
            .await
            .context("starting the dispatcher")?,
        Role::Fanout => hookline_dispatcher::start_fanout(settings, shutdown.clone())
            .await
            .context("starting the fan-out stage")?,
    };
    if let Some(addr) = running.admin_addr() {
        tracing::info!(%addr, "admin port: /healthz /readyz /metrics");
    }
    let signal = wait_for_signal();
    tokio::pin!(signal);
    let finished = running.wait();
    tokio::pin!(finished);
    tokio::select! {
        result = &mut finished => return result.context("the dispatcher stopped"),
        signal = &mut signal => {
            signal?;
            tracing::info!("stop requested: draining in-flight deliveries");
        }
    }
    shutdown.cancel();
    finished.await.context("stopping the dispatcher")
}

#[cfg(unix)]
/// The registry options that were given win over the file's `[registry]`: the URL when it
/// is not the default, the CA file when set, and credentials as a whole (basic and bearer
/// are exclusive: a token on the command line replaces the file's user and password).
fn registry_options(file: &mut RegistrySettings, options: &RegistrySettings) {
    if options.url != RegistrySettings::default().url {
        file.url = options.url.clone();
    }
    if options.username.is_some() || options.password.is_some() || options.token.is_some() {
        file.username = options.username.clone();
        file.password = options.password.clone();
        file.token = options.token.clone();
    }
    if let Some(ca_file) = &options.ca_file {
        file.ca_file = Some(ca_file.clone());
    }
}

pub(crate) async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

#[cfg(not(unix))]
pub(crate) async fn wait_for_signal() -> anyhow::Result<()> {
    tokio::signal::ctrl_c()
        .await
        .context("listening for Ctrl-C")
}

#[cfg(test)]
mod tests {
    use hookline_core::secret::Secret;

    use super::*;

    #[test]
    fn registry_options_win_over_the_file_and_credentials_go_as_a_whole() {
        let file = RegistrySettings {
            url: "https://registry.internal/apis/ccompat/v7".to_owned(),
            username: Some("from-file".to_owned()),
            password: Some(Secret::new("file-password")),
            ca_file: Some("/etc/hookline/file-ca.pem".into()),
            ..RegistrySettings::default()
        };
        // No options: the file's settings stay.
        let mut merged = file.clone();
        registry_options(&mut merged, &RegistrySettings::default());
        assert_eq!(merged, file);
        // A token replaces the file's basic credentials; a CA file replaces the file's.
        let options = RegistrySettings {
            token: Some(Secret::new("cli-token")),
            ca_file: Some("/tmp/cli-ca.pem".into()),
            ..RegistrySettings::default()
        };
        let mut merged = file.clone();
        registry_options(&mut merged, &options);
        assert_eq!(merged.url, file.url);
        assert_eq!(merged.username, None);
        assert_eq!(merged.password, None);
        assert_eq!(merged.token.as_ref().map(Secret::expose), Some("cli-token"));
        assert_eq!(merged.ca_file, options.ca_file);
        assert!(
            merged.validate().is_err(),
            "the CLI's CA file does not exist"
        );
    }
}
