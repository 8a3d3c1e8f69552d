//! `hookline events`: one event's history from the attempt log, following it live, and
//! stopping it. A thin dispatcher: each subcommand lives in its own file.

mod cancel;
mod show;
mod tail;

use clap::{Subcommand, ValueEnum};

use super::Context;

/// Arguments of `hookline events`.
#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    #[command(subcommand)]
    command: EventsCommand,
}

#[derive(Debug, Subcommand)]
enum EventsCommand {
    /// The whole story of one event: published, fanned out, each attempt and its answer,
    /// retries by tier, parked, redriven, delivered. Exits 1 when the log has no record of it.
    Show(show::ShowArgs),
    /// Follow new attempt-log records (every event), one line each, until Ctrl-C.
    Tail(tail::TailArgs),
    /// Cancel an event (every delivery of it) or its delivery to one endpoint: dispatchers
    /// park what is still pending with reason `cancelled` instead of attempting it.
    Cancel(cancel::CancelArgs),
}

/// How results are printed.
#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub(crate) enum Output {
    /// Lines for people.
    #[default]
    Text,
    /// JSON (`show`: one object; `tail`: one object per line).
    Json,
}

/// The attempt-log topic: `--topic`, else `<events>.attempts`.
fn attempts_topic(topic: Option<&str>, context: &Context) -> String {
    topic.map_or_else(|| context.topics.attempts(), str::to_owned)
}

/// Runs `hookline events`.
pub async fn run(args: EventsArgs, context: &Context) -> anyhow::Result<()> {
    match args.command {
        EventsCommand::Show(show) => show::run(show, context).await,
        EventsCommand::Tail(tail) => tail::run(tail, context).await,
        EventsCommand::Cancel(cancel) => cancel::run(cancel, context).await,
    }
}
