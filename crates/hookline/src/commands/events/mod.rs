//! `hookline events`: what happened to an event, and stopping it.

mod cancel;

use clap::Subcommand;

use super::Context;

/// Arguments of `hookline events`.
#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    #[command(subcommand)]
    command: EventsCommand,
}

#[derive(Debug, Subcommand)]
enum EventsCommand {
    /// Cancel an event (every delivery of it) or its delivery to one endpoint: dispatchers
    /// park what is still pending with reason `cancelled` instead of attempting it.
    Cancel(cancel::CancelArgs),
}

/// Runs `hookline events`.
pub async fn run(args: EventsArgs, context: &Context) -> anyhow::Result<()> {
    match args.command {
        EventsCommand::Cancel(args) => cancel::run(args, context).await,
    }
}
