//! `hookline outbox migrate`, `status` and `retry`.

use anyhow::Context as _;
use hookline_producer::outbox::{OutboxConfig, OutboxStatus, OutboxStore};
use uuid::Uuid;

use super::Output;

/// Options of `hookline outbox status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// How to print.
    #[arg(long, value_enum, default_value_t)]
    output: Output,
    /// Most FAILED tasks listed.
    #[arg(long, default_value_t = 50)]
    limit: u32,
}

/// Options of `hookline outbox retry`.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub struct RetryArgs {
    /// The FAILED task to put back.
    #[arg(value_name = "TASK_ID")]
    task_id: Option<Uuid>,
    /// Put back every FAILED task.
    #[arg(long)]
    failed: bool,
}

fn store(config: &OutboxConfig) -> anyhow::Result<OutboxStore> {
    let settings = config
        .store_settings()
        .context("invalid outbox configuration")?;
    Ok(OutboxStore::new(&settings)?)
}

/// Creates the table or brings it up to date.
pub async fn migrate(config: &OutboxConfig) -> anyhow::Result<()> {
    let store = store(config)?;
    store.migrate().await.context("migrating the outbox")?;
    println!(
        "the outbox table {}.hookline_outbox is up to date",
        store.schema()
    );
    Ok(())
}

/// Prints the counts, the oldest pending age and the failed tasks.
pub async fn status(args: StatusArgs, config: &OutboxConfig) -> anyhow::Result<()> {
    let store = store(config)?;
    let status = store
        .status(args.limit)
        .await
        .context("reading the outbox")?;
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&status)?),
        Output::Text => print!("{}", text(&status)),
    }
    Ok(())
}

fn text(status: &OutboxStatus) -> String {
    let mut out = format!(
        "NOT_CALLED {}\nWIP        {}\nCOMPLETE   {}\nFAILED     {}\n",
        status.not_called, status.wip, status.complete, status.failed
    );
    match status.oldest_pending_age_s {
        Some(age) => out.push_str(&format!("oldest pending: {age:.1} s\n")),
        None => out.push_str("oldest pending: none\n"),
    }
    for task in &status.failed_tasks {
        out.push_str(&format!(
            "FAILED {} {} {}={} retries={} last_error: {}\n",
            task.id,
            task.event_type,
            task.aggregatetype,
            task.aggregateid,
            task.retry_count,
            task.last_error.as_deref().unwrap_or("-")
        ));
    }
    out
}

/// Puts FAILED tasks back.
pub async fn retry(args: RetryArgs, config: &OutboxConfig) -> anyhow::Result<()> {
    let store = store(config)?;
    let id = args.task_id.map(|id| id.to_string());
    let retried = store
        .retry_failed(id.as_deref())
        .await
        .context("putting FAILED tasks back")?;
    match (&id, retried) {
        (Some(id), 0) => anyhow::bail!("no FAILED task {id}"),
        _ => println!("{retried} task(s) back to NOT_CALLED"),
    }
    Ok(())
}
