//! `hookline events tail`: follows new attempt-log records, filtered by endpoint and tenant,
//! one line each, until Ctrl-C.

use std::io::Write;

use anyhow::Context as _;
use hookline_dlq::history::{Tail, TailFilter, tail_json, tail_line};

use super::{Context, Output, attempts_topic};

/// Options of `hookline events tail`.
#[derive(Debug, clap::Args)]
pub(crate) struct TailArgs {
    /// Only this endpoint's records.
    #[arg(long)]
    endpoint: Option<String>,
    /// Only this tenant's records.
    #[arg(long)]
    tenant: Option<String>,
    /// The attempt-log topic (default `<events>.attempts`, as `[attempts] topic`).
    #[arg(long)]
    topic: Option<String>,
    /// Text lines, or one JSON object per line.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
}

/// Runs `hookline events tail` until Ctrl-C (or SIGTERM).
pub(crate) async fn run(args: TailArgs, context: &Context) -> anyhow::Result<()> {
    let topic = attempts_topic(args.topic.as_deref(), context);
    let filter = TailFilter {
        endpoint: args.endpoint,
        tenant: args.tenant,
    };
    let mut tail = Tail::open(&context.kafka, context.registry()?, &topic, filter)
        .await
        .with_context(|| format!("following {topic}"))?;
    eprintln!("following {topic} (Ctrl-C to stop)");
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        let record = tokio::select! {
            stopped = &mut stop => return stopped,
            record = tail.next() => record.with_context(|| format!("following {topic}"))?,
        };
        let line = match args.output {
            Output::Text => tail_line(&record),
            Output::Json => tail_json(&record).to_string(),
        };
        let mut out = std::io::stdout().lock();
        // A closed pipe (`| head`) ends the tail quietly.
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            return Ok(());
        }
    }
}

async fn stop_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
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
    {
        tokio::signal::ctrl_c()
            .await
            .context("listening for Ctrl-C")
    }
}
