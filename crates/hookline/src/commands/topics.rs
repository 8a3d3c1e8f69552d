//! `hookline topics`: provisioning the events, retry, DLQ and endpoint topics.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;
use hookline_core::policy::RetryTiers;
use hookline_dispatcher::DispatcherConfig;
use hookline_producer::{TopicsPlan, provision};

use super::Context;

/// Arguments of `hookline topics`.
#[derive(Debug, clap::Args)]
pub struct TopicsArgs {
    #[command(subcommand)]
    command: TopicsCommand,
}

#[derive(Debug, Subcommand)]
enum TopicsCommand {
    /// Create the topics that do not exist yet (events, fan-out, retry tiers, DLQ, attempt
    /// log, DLQ actions, endpoints); existing topics are left as they are. The attempt log
    /// (`<events>.attempts`) gets `--partitions` partitions and the retention of the
    /// dispatcher config's `[attempts] retention_ms`.
    Create(CreateArgs),
}

#[derive(Debug, clap::Args)]
struct CreateArgs {
    /// Partitions of the events topic, its retry tiers, its DLQ and its attempt log.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(i32).range(1..))]
    partitions: i32,
    /// Partitions of the compacted tables (endpoints, DLQ actions).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..))]
    table_partitions: i32,
    /// Replication factor of every topic.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i32).range(1..))]
    replication: i32,
    /// Retry tiers, as delays with ms, s, m or h.
    #[arg(long, default_value = "5s,1m,10m,1h", value_parser = parse_tiers)]
    tiers: RetryTiers,
    /// The dispatcher's config file (as for `hookline dispatch`; `HOOKLINE_<SECTION>__<KEY>`
    /// variables apply too): the attempt log keeps records for its `attempts.retention_ms`.
    #[arg(long, env = "HOOKLINE_CONFIG")]
    config: Option<PathBuf>,
    /// How long the attempt log keeps records, in milliseconds (instead of the config's
    /// `attempts.retention_ms`; default 604800000, 7 days).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(1..))]
    attempts_retention_ms: Option<i64>,
}

/// Runs `hookline topics`.
pub async fn run(args: TopicsArgs, context: &Context) -> anyhow::Result<()> {
    match args.command {
        TopicsCommand::Create(create) => {
            let attempts = DispatcherConfig::load(create.config.as_deref())
                .context("loading the dispatcher configuration")?
                .attempts;
            if let Some(topic) = attempts.topic.as_ref()
                && *topic != context.topics.attempts()
            {
                eprintln!(
                    "note: attempts.topic is {topic}; this creates {} (create {topic} yourself, \
                     or leave attempts.topic unset)",
                    context.topics.attempts()
                );
            }
            let plan = TopicsPlan {
                tiers: create.tiers,
                partitions: create.partitions,
                table_partitions: create.table_partitions,
                replication: create.replication,
                attempts_retention_ms: create
                    .attempts_retention_ms
                    .unwrap_or(attempts.retention_ms),
                ..TopicsPlan::new(context.topics.clone())
            };
            let report = provision(&context.kafka, &plan).await.with_context(|| {
                format!("provisioning topics on {}", context.kafka.bootstrap_servers)
            })?;
            for name in &report.created {
                println!("created {name}");
            }
            for name in &report.existing {
                println!("exists  {name}");
            }
            eprintln!(
                "{} topics created, {} existed already",
                report.created.len(),
                report.existing.len()
            );
            Ok(())
        }
    }
}

fn parse_tiers(text: &str) -> Result<RetryTiers, String> {
    let suffixes: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    RetryTiers::from_suffixes(&suffixes).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers() {
        assert_eq!(parse_tiers("5s, 1m,10m,1h"), Ok(RetryTiers::default()));
        assert!(parse_tiers("").is_err());
        assert!(parse_tiers("5s,5s").is_err());
        assert!(parse_tiers("5x").is_err());
    }
}
