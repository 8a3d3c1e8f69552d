//! Provisioning hookline's topics: what to create (pure) and creating it (I/O).

use hookline_core::policy::RetryTiers;
use hookline_kafka::{KafkaSettings, TopicSpec, ensure_topics};

use crate::topics::Topics;

const DAY_MS: i64 = 24 * 3_600_000;

/// Which topics to create, and how.
#[derive(Clone, Debug, PartialEq)]
pub struct TopicsPlan {
    /// The topic names.
    pub topics: Topics,
    /// The retry tiers; one topic each.
    pub tiers: RetryTiers,
    /// Partitions of the events topic, which its retry tiers and DLQ share.
    pub partitions: i32,
    /// Partitions of the endpoint table and of the DLQ actions topic.
    pub table_partitions: i32,
    /// Replication factor of every topic; 1 on a single local broker.
    pub replication: i32,
    /// How long events are kept, in milliseconds.
    pub events_retention_ms: i64,
    /// How long retry records are kept, in milliseconds; must exceed the longest tier.
    pub retry_retention_ms: i64,
    /// How long dead letters are kept, in milliseconds.
    pub dlq_retention_ms: i64,
    /// How long attempt-log records are kept, in milliseconds (`attempts.retention_ms`).
    pub attempts_retention_ms: i64,
}

impl TopicsPlan {
    /// The default plan for these names: 6 partitions, replication 1, the default tiers,
    /// events kept 7 days, retries 3 days, dead letters 30 days.
    pub fn new(topics: Topics) -> Self {
        TopicsPlan {
            topics,
            tiers: RetryTiers::default(),
            partitions: 6,
            table_partitions: 3,
            replication: 1,
            events_retention_ms: 7 * DAY_MS,
            retry_retention_ms: 3 * DAY_MS,
            dlq_retention_ms: 30 * DAY_MS,
            attempts_retention_ms: 7 * DAY_MS,
        }
    }

    /// The topics to create, in order: events, fan-out (tenant events), retry tiers
    /// (shortest first), the slow lane, DLQ, attempts, DLQ actions, endpoints,
    /// cancellations.
    pub fn specs(&self) -> Result<Vec<TopicSpec>, ProvisionError> {
        self.check()?;
        let min_insync = if self.replication >= 3 { "2" } else { "1" };
        let log = |name: String, partitions: i32, retention_ms: i64| {
            TopicSpec::new(name, partitions, self.replication)
                .config("cleanup.policy", "delete")
                .config("retention.ms", retention_ms.to_string())
                .config("min.insync.replicas", min_insync)
        };
        let table = |name: String| {
            TopicSpec::new(name, self.table_partitions, self.replication)
                .config("cleanup.policy", "compact")
                .config("min.insync.replicas", min_insync)
                // Small segments so that compaction can run; tombstones stay a day so that
                // a reader that is behind still sees the delete.
                .config("segment.ms", 3_600_000.to_string())
                .config("min.cleanable.dirty.ratio", "0.1")
                .config("delete.retention.ms", DAY_MS.to_string())
        };
        let mut specs = vec![log(
            self.topics.events.clone(),
            self.partitions,
            self.events_retention_ms,
        )];
        specs.push(log(
            self.topics.fanout(),
            self.partitions,
            self.events_retention_ms,
        ));
        specs.extend(self.tiers.tiers().iter().map(|tier| {
            log(
                self.topics.retry(tier.delay),
                self.partitions,
                self.retry_retention_ms,
            )
        }));
        // Its records wait for their endpoint, not for a time: kept as long as events.
        specs.push(log(
            self.topics.lane(),
            self.partitions,
            self.events_retention_ms,
        ));
        specs.push(log(
            self.topics.dlq(),
            self.partitions,
            self.dlq_retention_ms,
        ));
        // As many partitions as the events topic: a reader computes an event's partition.
        specs.push(log(
            self.topics.attempts(),
            self.partitions,
            self.attempts_retention_ms,
        ));
        specs.push(table(self.topics.dlq_actions()));
        specs.push(table(self.topics.endpoints.clone()));
        // Compacted, and deleted after the events' retention: a cancellation is forgotten
        // once the events it could stop are gone.
        specs.push(
            TopicSpec::new(
                self.topics.cancellations(),
                self.table_partitions,
                self.replication,
            )
            .config("cleanup.policy", "compact,delete")
            .config("retention.ms", self.events_retention_ms.to_string())
            .config("min.insync.replicas", min_insync)
            .config("segment.ms", 3_600_000.to_string())
            .config("min.cleanable.dirty.ratio", "0.1")
            .config("delete.retention.ms", DAY_MS.to_string()),
        );
        Ok(specs)
    }

    fn check(&self) -> Result<(), ProvisionError> {
        let invalid = |field, problem: &str| ProvisionError::InvalidPlan {
            field,
            problem: problem.to_owned(),
        };
        if self.topics.events.is_empty() {
            return Err(invalid("topics.events", "must not be empty"));
        }
        if self.topics.endpoints.is_empty() {
            return Err(invalid("topics.endpoints", "must not be empty"));
        }
        if self.partitions < 1 {
            return Err(invalid("partitions", "must be at least 1"));
        }
        if self.table_partitions < 1 {
            return Err(invalid("table_partitions", "must be at least 1"));
        }
        if self.replication < 1 {
            return Err(invalid("replication", "must be at least 1"));
        }
        for (field, ms) in [
            ("events_retention_ms", self.events_retention_ms),
            ("retry_retention_ms", self.retry_retention_ms),
            ("dlq_retention_ms", self.dlq_retention_ms),
            ("attempts_retention_ms", self.attempts_retention_ms),
        ] {
            if ms < 1 {
                return Err(invalid(field, "must be positive"));
            }
        }
        if let Some(longest) = self.tiers.tiers().last().map(|tier| tier.delay) {
            // Twice the longest delay, so that a record parked in a tier is never deleted
            // before it is due.
            let needed = longest.as_millis().saturating_mul(2);
            if u128::try_from(self.retry_retention_ms).unwrap_or(0) < needed {
                return Err(invalid(
                    "retry_retention_ms",
                    &format!("must be at least twice the longest tier ({needed} ms)"),
                ));
            }
        }
        Ok(())
    }
}

/// What [`provision`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProvisionReport {
    /// Topics it created.
    pub created: Vec<String>,
    /// Topics that existed already and were left alone (their configs are not checked).
    pub existing: Vec<String>,
}

/// Why provisioning failed.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// The plan itself is wrong.
    #[error("invalid topics plan: `{field}` {problem}")]
    InvalidPlan {
        /// The plan's field.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// Kafka refused or could not be reached.
    #[error("creating topics")]
    Kafka(#[source] hookline_kafka::Error),
}

/// Creates every topic of `plan` that does not exist yet; leaves the others alone.
pub async fn provision(
    settings: &KafkaSettings,
    plan: &TopicsPlan,
) -> Result<ProvisionReport, ProvisionError> {
    let specs = plan.specs()?;
    let created = ensure_topics(settings, &specs)
        .await
        .map_err(ProvisionError::Kafka)?;
    let existing = specs
        .into_iter()
        .map(|spec| spec.name)
        .filter(|name| !created.contains(name))
        .collect();
    tracing::info!(created = ?created, existing = ?existing, "provisioned topics");
    Ok(ProvisionReport { created, existing })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config<'a>(spec: &'a TopicSpec, key: &str) -> Option<&'a str> {
        spec.configs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn default_plan() {
        let plan = TopicsPlan::new(Topics::default());
        let specs = plan.specs().expect("valid plan");
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "webhook-events",
                "webhook-events.fanout",
                "webhook-events.retry.5s",
                "webhook-events.retry.1m",
                "webhook-events.retry.10m",
                "webhook-events.retry.1h",
                "webhook-events.lane",
                "webhook-events.dlq",
                "webhook-events.attempts",
                "webhook-events.dlq-actions",
                "webhook-endpoints",
                "webhook-events.cancellations",
            ]
        );
        let cancellations = &specs[11];
        assert_eq!(
            config(cancellations, "cleanup.policy"),
            Some("compact,delete")
        );
        assert_eq!(config(cancellations, "retention.ms"), Some("604800000"));
        assert_eq!(cancellations.partitions, 3);
        let attempts = &specs[8];
        assert_eq!(attempts.partitions, 6, "as many as the events topic");
        assert_eq!(config(attempts, "cleanup.policy"), Some("delete"));
        assert_eq!(config(attempts, "retention.ms"), Some("604800000"));
        assert!(specs[..8].iter().all(|s| s.partitions == 6));
        assert_eq!(config(&specs[0], "cleanup.policy"), Some("delete"));
        assert_eq!(config(&specs[1], "retention.ms"), Some("604800000"));
        assert_eq!(config(&specs[2], "retention.ms"), Some("259200000"));
        assert_eq!(
            config(&specs[6], "retention.ms"),
            Some("604800000"),
            "the lane keeps records as long as the events topic"
        );
        assert_eq!(config(&specs[7], "retention.ms"), Some("2592000000"));
        let endpoints = &specs[10];
        assert_eq!(config(endpoints, "cleanup.policy"), Some("compact"));
        assert_eq!(endpoints.partitions, 3);
        assert_eq!(config(endpoints, "retention.ms"), None);
    }

    #[test]
    fn one_retry_topic_per_tier() {
        let mut plan = TopicsPlan::new(Topics::new("ev", "ep"));
        plan.tiers = RetryTiers::from_suffixes(&["1m", "200ms"]).expect("valid tiers");
        let names: Vec<String> = plan
            .specs()
            .expect("valid plan")
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names[2..4], ["ev.retry.200ms", "ev.retry.1m"]);
        assert_eq!(
            names.len(),
            10,
            "events, fan-out, 2 tiers, lane, DLQ, attempts, actions, endpoints, cancellations"
        );
    }

    #[test]
    fn bad_plans_name_the_field() {
        let field_of = |plan: TopicsPlan| match plan.specs() {
            Err(ProvisionError::InvalidPlan { field, .. }) => field,
            other => panic!("expected an invalid plan, got {other:?}"),
        };
        let base = TopicsPlan::new(Topics::default());
        assert_eq!(
            field_of(TopicsPlan {
                partitions: 0,
                ..base.clone()
            }),
            "partitions"
        );
        assert_eq!(
            field_of(TopicsPlan {
                replication: 0,
                ..base.clone()
            }),
            "replication"
        );
        assert_eq!(
            field_of(TopicsPlan {
                retry_retention_ms: 3_600_000,
                ..base.clone()
            }),
            "retry_retention_ms"
        );
        assert_eq!(
            field_of(TopicsPlan {
                topics: Topics::new("", "ep"),
                ..base
            }),
            "topics.events"
        );
    }
}
