//! `hookline events show EVENT_ID`: reads the one attempt-log partition the event id hashes
//! to and prints the event's story.

use anyhow::{Context as _, bail};
use hookline_dlq::filter::{TimeBound, format_ms, now_ms};
use hookline_dlq::history::{Lookup, LookupOptions, lookup};

use super::{Context, Output, attempts_topic};

/// Options of `hookline events show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The event id.
    event_id: String,
    /// Only records from this time on: RFC 3339, a date, or relative (30m, 2h, 7d); default
    /// everything the topic keeps.
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// The attempt-log topic (default `<events>.attempts`, as `[attempts] topic`).
    #[arg(long)]
    topic: Option<String>,
    /// Text lines, or one JSON object `{"event_id", "steps": [...], "records_scanned", ...}`.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
}

/// Runs `hookline events show`.
pub(crate) async fn run(args: ShowArgs, context: &Context) -> anyhow::Result<()> {
    let mut options = LookupOptions::new(attempts_topic(args.topic.as_deref(), context));
    if let Some(since) = &args.since {
        options.since_ms = Some(TimeBound::parse("--since", since)?.to_ms(now_ms()));
    }
    let found = print_history(context, &args.event_id, &options, args.output).await?;
    if found.story.is_empty() {
        let since = options.since_ms.map_or_else(
            || "everything kept".to_owned(),
            |ms| format!("since {}", format_ms(ms)),
        );
        bail!(
            "no attempt-log record of event {} in {} partition {} ({} records read, {since}): \
             the id may be wrong, its records past retention, or the attempt log off",
            args.event_id,
            found.topic,
            found.partition,
            found.records_scanned
        );
    }
    Ok(())
}

/// Looks `event_id` up and prints its story (nothing for an event without records).
async fn print_history(
    context: &Context,
    event_id: &str,
    options: &LookupOptions,
    output: Output,
) -> anyhow::Result<Lookup> {
    let registry = context.registry()?;
    let found = lookup(&context.kafka, &registry, event_id, options)
        .await
        .with_context(|| {
            format!(
                "reading the history of event {event_id} from {}",
                options.topic
            )
        })?;
    if found.story.is_empty() {
        return Ok(found);
    }
    match output {
        Output::Text => {
            print!("{}", found.story.to_text());
            eprintln!(
                "{} records read from {} partition {} of {}",
                found.records_scanned, found.topic, found.partition, found.partitions
            );
        }
        Output::Json => println!("{}", found.to_json()),
    }
    Ok(found)
}
