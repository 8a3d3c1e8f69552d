//! `hookline outbox`: the transactional outbox's relay (`run`), its table (`migrate`), what
//! it holds (`status`), and putting failed tasks back (`retry`).

mod config;
mod run;
mod status;

use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};
use hookline_core::secret::Secret;

use super::Context;

/// Options of `hookline outbox`.
#[derive(Debug, clap::Args)]
pub struct OutboxArgs {
    /// A TOML config file whose `[outbox]` section configures the outbox;
    /// `HOOKLINE_OUTBOX__<KEY>` variables override it (e.g. `HOOKLINE_OUTBOX__BATCH_SIZE=50`).
    #[arg(long, global = true, env = "HOOKLINE_CONFIG")]
    config: Option<PathBuf>,
    /// The database: `postgres://user:password@host:port/database`, or `${env:NAME}` /
    /// `${file:PATH}` (also `HOOKLINE_OUTBOX__POSTGRES_URL` or `[outbox] postgres_url`).
    #[arg(long, global = true, value_name = "URL", value_parser = Secret::resolve)]
    postgres_url: Option<Secret>,
    /// The schema of the `hookline_outbox` table (default `public`).
    #[arg(long, global = true)]
    schema: Option<String>,
    #[command(subcommand)]
    command: OutboxCommand,
}

#[derive(Debug, Subcommand)]
enum OutboxCommand {
    /// Run the relay: publish the outbox's tasks to Kafka until SIGTERM or SIGINT.
    Run(run::RunArgs),
    /// Create the outbox table (or bring it up to date).
    Migrate,
    /// Counts by state, the oldest pending task's age, and the FAILED tasks with their errors.
    Status(status::StatusArgs),
    /// Put FAILED tasks back to NOT_CALLED (retries reset): one task, or `--failed` for all.
    Retry(status::RetryArgs),
}

/// How results are printed.
#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub(crate) enum Output {
    /// Lines for people.
    #[default]
    Text,
    /// One JSON object.
    Json,
}

/// Runs `hookline outbox`.
pub async fn run(args: OutboxArgs, context: &Context) -> anyhow::Result<()> {
    let config = config::load(args.config.as_deref(), args.postgres_url, args.schema)?;
    match args.command {
        OutboxCommand::Run(run) => run::run(run, config, context).await,
        OutboxCommand::Migrate => status::migrate(&config).await,
        OutboxCommand::Status(status) => status::status(status, &config).await,
        OutboxCommand::Retry(retry) => status::retry(retry, &config).await,
    }
}
