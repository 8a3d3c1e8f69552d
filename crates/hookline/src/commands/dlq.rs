//! `hookline dlq`: inspect, redrive, resolve, note and archive dead letters. Every command
//! takes the same selection flags; handled (redriven or resolved) records are left out
//! unless `--all`, and every action is recorded in `<events>.dlq-actions`.

pub(super) mod archive;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::{Subcommand, ValueEnum};
use hookline_dlq::escape::escape_control;
use hookline_dlq::filter::{FilterSpec, now_ms};
use hookline_dlq::json::to_json;
use hookline_dlq::original::original_event;
use hookline_dlq::redrive::{RedriveEvent, parse_rate, redrive};
use hookline_dlq::resolve::{Mark, mark};
use hookline_dlq::select::select_from;
use hookline_dlq::view::{Summary, item_text, table_header};
use hookline_dlq::{
    Filter, ReadOptions, RecordRef, RedriveOptions, SelectedItem, Selection, Sources, Target,
};
use hookline_kafka::Registry;
use serde_json::Value;

use super::Context;

/// Arguments of `hookline dlq`.
#[derive(Debug, clap::Args)]
pub struct DlqArgs {
    #[command(subcommand)]
    command: DlqCommand,
}

#[derive(Debug, Subcommand)]
enum DlqCommand {
    /// Show dead letters: a table on a terminal, JSON lines otherwise, or a summary.
    Inspect(InspectArgs),
    /// Re-publish dead letters to the main topic (or a retry tier) with their event ids.
    Redrive(RedriveArgs),
    /// Mark dead letters handled without a redrive, with a note.
    Resolve(MarkArgs),
    /// Add a note to dead letters' history; their status does not change.
    Note(MarkArgs),
    /// Write dead letters to a file (Avro with its schema, or JSON lines), or to object
    /// storage (--to s3://bucket/prefix/, gs://, az://, file://) as Avro objects by day.
    Archive(archive::ArchiveArgs),
}

/// Which records; criteria combine with AND, repeated values of one flag with OR.
#[derive(Debug, clap::Args)]
struct SelectArgs {
    /// Error reason code (e.g. retries_exhausted); repeatable or comma-separated.
    #[arg(long = "reason", value_name = "CODE")]
    reasons: Vec<String>,
    /// Endpoint id; repeatable or comma-separated.
    #[arg(long = "endpoint", value_name = "ID")]
    endpoints: Vec<String>,
    /// Tenant id (the tenant of a fanned-out delivery); repeatable or comma-separated.
    #[arg(long = "tenant", value_name = "ID")]
    tenants: Vec<String>,
    /// Event type; repeatable or comma-separated.
    #[arg(long = "event-type", value_name = "TYPE")]
    event_types: Vec<String>,
    /// Event id; repeatable or comma-separated.
    #[arg(long = "event-id", value_name = "ID")]
    event_ids: Vec<String>,
    /// Parked at or after: RFC 3339, a date, `now`, or a duration back from now (30m, 2h 30m,
    /// 7d, PT15M).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Parked before: RFC 3339, a date, `now`, or a duration back from now (30m, 2h 30m,
    /// 7d, PT15M).
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// DLQ partition; repeatable.
    #[arg(long = "partition", value_name = "N")]
    partitions: Vec<i32>,
    /// First DLQ offset (inclusive).
    #[arg(long, value_name = "OFFSET")]
    from_offset: Option<i64>,
    /// Last DLQ offset (inclusive).
    #[arg(long, value_name = "OFFSET")]
    to_offset: Option<i64>,
    /// An explicit record, <partition>/<offset>; repeatable or comma-separated.
    #[arg(long = "record", value_name = "P/O")]
    records: Vec<String>,
}

impl SelectArgs {
    fn filter(&self) -> anyhow::Result<Filter> {
        let spec = FilterSpec {
            reasons: self.reasons.clone(),
            endpoints: self.endpoints.clone(),
            tenants: self.tenants.clone(),
            event_types: self.event_types.clone(),
            event_ids: self.event_ids.clone(),
            since: self.since.clone(),
            until: self.until.clone(),
            partitions: self.partitions.clone(),
            from_offset: self.from_offset,
            to_offset: self.to_offset,
            records: self.records.clone(),
        };
        Ok(spec.build(now_ms())?)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    /// Aligned columns, with each record's history below it.
    Table,
    /// One JSON object per record, every envelope field.
    Json,
}

#[derive(Debug, clap::Args)]
struct InspectArgs {
    #[command(flatten)]
    select: SelectArgs,
    /// Output format (default: table on a terminal, else json).
    #[arg(long, value_enum)]
    output: Option<Output>,
    /// Counts by reason, endpoint and status, and the oldest and newest, instead of records.
    #[arg(long, conflicts_with = "follow")]
    summary: bool,
    /// Keep printing new records as they arrive.
    #[arg(long, short = 'f', conflicts_with = "file")]
    follow: bool,
    /// Stop after this many records.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// Include redriven and resolved records.
    #[arg(long)]
    all: bool,
    /// Read an archive written by `hookline dlq archive` instead of the topic: a file, a
    /// directory, or an object-store URL (s3://bucket/prefix/, gs://, az://, file://): one
    /// object, or every .avro object under the prefix, in key order (by topic, day, run).
    #[arg(long, value_name = "PATH|URL")]
    file: Option<String>,
    /// A TOML config file whose `[archive]` section says how to reach the object store;
    /// `HOOKLINE_ARCHIVE__<KEY>` variables override it.
    #[arg(long, env = "HOOKLINE_CONFIG", value_name = "PATH")]
    config: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct RedriveArgs {
    #[command(flatten)]
    select: SelectArgs,
    /// Send to this retry tier (e.g. 5s, 1m) instead of the main topic.
    #[arg(long, value_name = "DELAY")]
    to_tier: Option<String>,
    /// List what would be sent; send and record nothing.
    #[arg(long)]
    dry_run: bool,
    /// At most this many records per second (N, N/s or N/m; at least 0.001/s).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    rate: Option<f64>,
    /// Who is acting, for the headers and the audit trail (default: $USER).
    #[arg(long, env = "HOOKLINE_OPERATOR")]
    by: Option<String>,
}

#[derive(Debug, clap::Args)]
struct MarkArgs {
    #[command(flatten)]
    select: SelectArgs,
    /// Why: kept in the audit trail.
    #[arg(long)]
    note: String,
    /// List what would be marked; record nothing.
    #[arg(long)]
    dry_run: bool,
    /// Who is acting, for the audit trail (default: $USER).
    #[arg(long, env = "HOOKLINE_OPERATOR")]
    by: Option<String>,
}

/// Runs `hookline dlq`.
pub async fn run(args: DlqArgs, context: &Context) -> anyhow::Result<()> {
    match args.command {
        DlqCommand::Inspect(a) => inspect(a, context).await,
        DlqCommand::Redrive(a) => run_redrive(a, context).await,
        DlqCommand::Resolve(a) => run_mark(a, Mark::Resolve, context).await,
        DlqCommand::Note(a) => run_mark(a, Mark::Note, context).await,
        DlqCommand::Archive(a) => archive::archive(a, context).await,
    }
}

fn operator(by: Option<String>) -> String {
    by.or_else(|| std::env::var("USER").ok())
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn sources(context: &Context) -> anyhow::Result<Sources<'_>> {
    Ok(Sources {
        kafka: &context.kafka,
        registry: context.registry()?,
        dlq_topic: context.topics.dlq(),
        actions_topic: context.topics.dlq_actions(),
    })
}

async fn open(
    context: &Context,
    filter: Filter,
    follow: bool,
    all: bool,
) -> anyhow::Result<Selection> {
    let options = ReadOptions {
        follow,
        ..ReadOptions::default()
    };
    Ok(Selection::open(sources(context)?, filter, options, all).await?)
}

/// Prints to stdout; a closed pipe (`| head`) ends the output quietly.
struct Printer(std::io::StdoutLock<'static>);

impl Printer {
    fn line(&mut self, text: &str) -> anyhow::Result<bool> {
        match writeln!(self.0, "{text}").and_then(|()| self.0.flush()) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
            Err(e) => Err(e).context("writing to stdout"),
        }
    }
}

async fn inspect(args: InspectArgs, context: &Context) -> anyhow::Result<()> {
    let filter = args.select.filter()?;
    let output = args.output.unwrap_or(if std::io::stdout().is_terminal() {
        Output::Table
    } else {
        Output::Json
    });
    let mut view = View {
        // Only JSON lines carry the decoded original event; the registry may be down when
        // reading an archive, which only leaves it out.
        registry: (output == Output::Json && !args.summary)
            .then(|| context.registry().ok())
            .flatten(),
        out: Printer(std::io::stdout().lock()),
        summary: Summary::default(),
        summarize: args.summary,
        table: output == Output::Table,
        shown: 0,
    };
    if output == Output::Table && !args.summary && !view.out.line(&table_header())? {
        return Ok(());
    }
    let limit = args.limit.unwrap_or(u64::MAX);
    if let Some(source) = &args.file {
        let mut records = archive::open_archive(source, args.config.as_deref()).await?;
        'read: while view.shown < limit {
            let Some(s) = records.next().await? else {
                break;
            };
            let (kept, hidden) = select_from(vec![s], &filter, args.all);
            view.summary.hidden_handled += hidden;
            for s in kept {
                if !view.show(SelectedItem::Record(Box::new(s))).await? {
                    break 'read;
                }
            }
        }
    } else {
        let mut selection = open(context, filter, args.follow, args.all).await?;
        while view.shown < limit {
            let Some(item) = selection.next().await? else {
                break;
            };
            if !view.show(item).await? {
                return Ok(());
            }
        }
        view.summary.hidden_handled = selection.stats().hidden_handled;
        warn_undecodable(selection.skipped_undecodable());
    }
    if args.summary {
        let text = match output {
            Output::Table => view.summary.to_text(),
            Output::Json => view.summary.to_json().to_string(),
        };
        view.out.line(text.trim_end())?;
    } else if view.summary.hidden_handled > 0 && output == Output::Table {
        eprintln!(
            "{} redriven or resolved records not shown (--all shows them)",
            view.summary.hidden_handled
        );
    }
    Ok(())
}

/// Where `inspect` puts what it reads: printed rows, or a summary.
struct View {
    registry: Option<Arc<Registry>>,
    out: Printer,
    summary: Summary,
    summarize: bool,
    table: bool,
    shown: u64,
}

impl View {
    /// Shows or counts one item; `false` when stdout is closed.
    async fn show(&mut self, item: SelectedItem) -> anyhow::Result<bool> {
        self.shown += 1;
        match (&item, self.summarize, &self.registry) {
            (SelectedItem::Record(s), true, _) => self.summary.add(s),
            (SelectedItem::Undecodable(_), true, _) => self.summary.undecodable += 1,
            (SelectedItem::Record(s), false, Some(registry)) => {
                let mut json = to_json(s);
                let payload = &s.record.envelope.original_payload_bytes;
                if let (Some(event), Value::Object(fields)) =
                    (original_event(registry, payload).await, &mut json)
                {
                    fields.insert("original_event".to_owned(), event);
                }
                return self.out.line(&json.to_string());
            }
            (_, false, _) => return self.out.line(&item_text(&item, self.table)),
        }
        Ok(true)
    }
}

/// ` tenant <id>` for a record that has a tenant, nothing for a direct delivery.
fn tenant_text(tenant: Option<&str>) -> String {
    tenant
        .map(|t| format!(" tenant {}", escape_control(t)))
        .unwrap_or_default()
}

fn warn_undecodable(places: &[RecordRef]) {
    if !places.is_empty() {
        let list: Vec<String> = places.iter().map(ToString::to_string).collect();
        eprintln!(
            "warning: {} records could not be decoded, so could not be matched: {} (inspect them with --record)",
            places.len(),
            list.join(", ")
        );
    }
}

async fn run_redrive(args: RedriveArgs, context: &Context) -> anyhow::Result<()> {
    let filter = args.select.filter()?;
    let target = Target::parse(args.to_tier.as_deref()).map_err(anyhow::Error::msg)?;
    let options = RedriveOptions {
        target,
        events_topic: context.topics.events.clone(),
        dry_run: args.dry_run,
        rate_per_s: args.rate,
        by: operator(args.by),
        role: None,
    };
    let sources = sources(context)?;
    let bar = std::io::stderr().is_terminal() && !args.dry_run;
    let report = redrive(sources, filter, &options, |event| {
        if let (true, RedriveEvent::Sent { done, total, .. }) = (bar, event) {
            let filled = done * 30 / total.max(1);
            eprint!(
                "\r[{}{}] {done}/{total}",
                "#".repeat(filled),
                ".".repeat(30 - filled)
            );
            if done == total {
                eprintln!();
            }
        }
    })
    .await?;
    let mut out = Printer(std::io::stdout().lock());
    let verb = if args.dry_run {
        "would redrive"
    } else {
        "redrove"
    };
    for sent in &report.sent {
        let endpoint = escape_control(sent.endpoint_id.as_deref().unwrap_or("-"));
        let line = format!(
            "{verb} {} event {} endpoint {endpoint}{} -> {}",
            sent.place,
            escape_control(&sent.event_id),
            tenant_text(sent.tenant_id.as_deref()),
            sent.target
        );
        if !out.line(&line)? {
            break;
        }
    }
    for refused in &report.refused {
        let endpoint = escape_control(refused.endpoint_id.as_deref().unwrap_or("-"));
        let line = format!(
            "refused {} event {} endpoint {endpoint}{}: {}",
            refused.place,
            escape_control(&refused.event_id),
            tenant_text(refused.tenant_id.as_deref()),
            escape_control(&refused.why.to_string())
        );
        if !out.line(&line)? {
            break;
        }
    }
    let refused = if report.refused.is_empty() {
        String::new()
    } else {
        format!(
            "; {} refused (they stay open: resolve them once handled)",
            report.refused.len()
        )
    };
    out.line(&format!(
        "{verb} {} records; {} already redriven or resolved, skipped{refused}",
        report.sent.len(),
        report.skipped_handled
    ))?;
    warn_undecodable(&report.undecodable);
    Ok(())
}

async fn run_mark(args: MarkArgs, mark_kind: Mark, context: &Context) -> anyhow::Result<()> {
    let filter = args.select.filter()?;
    if args.note.trim().is_empty() {
        bail!("--note must not be empty: it is the audit trail");
    }
    let by = operator(args.by);
    let report = mark(
        sources(context)?,
        filter,
        mark_kind,
        Some(&args.note),
        (by.as_str(), None),
        args.dry_run,
    )
    .await?;
    let verb = match (mark_kind, args.dry_run) {
        (Mark::Resolve, dry) => ["resolved", "would resolve"][usize::from(dry)],
        (Mark::Note, dry) => ["noted", "would note"][usize::from(dry)],
    };
    let mut out = Printer(std::io::stdout().lock());
    for place in &report.marked {
        if !out.line(&format!("{verb} {place}"))? {
            break;
        }
    }
    let skipped = if mark_kind == Mark::Resolve {
        format!(
            "; {} already redriven or resolved, skipped",
            report.skipped_handled
        )
    } else {
        String::new()
    };
    out.line(&format!("{verb} {} records{skipped}", report.marked.len()))?;
    warn_undecodable(&report.undecodable);
    Ok(())
}
