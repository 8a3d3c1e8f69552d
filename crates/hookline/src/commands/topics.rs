//! `hookline topics`: provisioning the events, retry, DLQ and endpoint topics.

use anyhow::Context as _;
use clap::Subcommand;
use hookline_core::policy::RetryTiers;
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
    /// Create the topics that do not exist yet (events, retry tiers, DLQ, DLQ actions,
    /// endpoints); existing topics are left as they are.
    Create(CreateArgs),
}

#[derive(Debug, clap::Args)]
struct CreateArgs {
    /// Partitions of the events topic, its retry tiers and its DLQ.
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
}

/// Runs `hookline topics`.
pub async fn run(args: TopicsArgs, context: &Context) -> anyhow::Result<()> {
    match args.command {
        TopicsCommand::Create(create) => {
            let plan = TopicsPlan {
                tiers: create.tiers,
                partitions: create.partitions,
                table_partitions: create.table_partitions,
                replication: create.replication,
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
