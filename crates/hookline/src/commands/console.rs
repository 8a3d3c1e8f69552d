//! `hookline console`: serve the operator console (the `[console]` section of the config
//! file, `HOOKLINE_CONSOLE__*` variables, `--listen`; the `[archive]` section too when
//! `archive_to` is set) until SIGTERM or SIGINT; and
//! `hookline console hash-token`: the argon2 hash of a token, for `[[console.users]]`.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::Subcommand;
use hookline_console::auth::token::{check_new_token, generate_token, hash_token};
use hookline_console::{ConsoleConfig, ConsoleContext, bind, serve};
use hookline_dlq::archive::store::StoreSettings;
use tokio_util::sync::CancellationToken;

use super::Context;
use super::dispatch::wait_for_signal;

/// Options of `hookline console`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ConsoleArgs {
    #[command(subcommand)]
    command: Option<ConsoleCommand>,
    /// A TOML config file whose `[console]` section configures the console;
    /// `HOOKLINE_CONSOLE__<KEY>` variables override it (e.g. `HOOKLINE_CONSOLE__PAGE_SIZE=20`).
    /// With `archive_to`, its `[archive]` section says how to reach the object store, as for
    /// `hookline dlq archive` (`HOOKLINE_ARCHIVE__<KEY>` variables override it).
    #[arg(long, env = "HOOKLINE_CONFIG")]
    config: Option<PathBuf>,
    /// Where to listen, host:port (default `[console] listen`, else 127.0.0.1:8088).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
}

#[derive(Debug, Subcommand)]
enum ConsoleCommand {
    /// Read a token from stdin and print its argon2 hash (a PHC string) for a
    /// `[[console.users]]` entry's `token_hash`.
    HashToken(HashTokenArgs),
}

#[derive(Debug, clap::Args)]
struct HashTokenArgs {
    /// Make a random token instead of reading one: it is printed once on stderr, the hash
    /// on stdout.
    #[arg(long)]
    generate: bool,
}

/// Runs `hookline console`.
pub async fn run(args: ConsoleArgs, context: &Context) -> anyhow::Result<()> {
    if let Some(ConsoleCommand::HashToken(hash)) = args.command {
        return hash_token_command(&hash);
    }
    let mut config =
        ConsoleConfig::load(args.config.as_deref()).context("loading the console configuration")?;
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    let settings = config
        .into_settings()
        .context("invalid console configuration")?;
    // The `[archive]` section is read only when archiving is on, so that a console without
    // it does not fail on a section it does not use.
    let archive = match &settings.archive_to {
        Some(_) => super::dlq::archive::load_settings(args.config.as_deref())?,
        None => StoreSettings::default(),
    };
    let console = ConsoleContext {
        kafka: context.kafka.clone(),
        registry: context.registry()?,
        topics: context.topics.clone(),
        archive,
    };
    let listener = bind(&settings.listen).await?;
    let addr = listener
        .local_addr()
        .context("reading the console's address")?;
    eprintln!("hookline console on http://{addr}/");
    tracing::info!(%addr, "console listening");
    let shutdown = CancellationToken::new();
    let mut server = tokio::spawn(serve(listener, settings, console, shutdown.clone()));
    tokio::select! {
        finished = &mut server => {
            return finished.context("the console stopped")?.context("the console stopped");
        }
        signal = wait_for_signal() => signal?,
    }
    // Requests in flight finish; then the server ends.
    shutdown.cancel();
    server
        .await
        .context("stopping the console")?
        .context("stopping the console")
}

fn hash_token_command(args: &HashTokenArgs) -> anyhow::Result<()> {
    let token = if args.generate {
        let token = generate_token();
        eprintln!("token (shown once; give it to the user): {token}");
        token
    } else {
        if std::io::stdin().is_terminal() {
            eprintln!("type the token, then Enter and Ctrl-D:");
        }
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the token from stdin")?;
        let token = text.trim_end_matches(['\n', '\r']).to_owned();
        if let Err(reason) = check_new_token(&token) {
            bail!("{reason}");
        }
        token
    };
    println!("{}", hash_token(&token)?);
    Ok(())
}
