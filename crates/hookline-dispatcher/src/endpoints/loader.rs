//! Filling the endpoint table: from the compacted endpoints topic (read to its end before
//! deliveries start, then followed), or from a static file for small setups.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hookline_core::endpoint::EndpointConfig;
use hookline_kafka::KafkaSettings;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::table::EndpointTable;
use crate::error::{DispatchError, Result};

/// The static endpoints file: `{"endpoints": {"<id>": {<endpoint config>}}}` as JSON, or the
/// same as TOML (`[endpoints.<id>]` tables).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EndpointsFile {
    endpoints: BTreeMap<String, EndpointConfig>,
}

/// Loads every endpoint of a file; any invalid entry stops start-up with its id and reason.
pub fn load_file(path: &Path, table: &EndpointTable) -> Result<usize> {
    let failed = |source: Box<dyn std::error::Error + Send + Sync>| DispatchError::EndpointsFile {
        path: path.to_owned(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(|e| failed(e.into()))?;
    let file: EndpointsFile = if path.extension().is_some_and(|ext| ext == "json") {
        serde_json::from_str(&text).map_err(|e| failed(e.into()))?
    } else {
        toml::from_str(&text).map_err(|e| failed(e.into()))?
    };
    let count = file.endpoints.len();
    for (id, config) in file.endpoints {
        table
            .upsert(id.as_str(), config)
            .map_err(|e| failed(e.into()))?;
    }
    Ok(count)
}

/// Reads the endpoints topic to its current end into `table`, then keeps following it in a
/// background task until `shutdown`.
pub async fn follow_topic(
    kafka: &KafkaSettings,
    topic: &str,
    table: Arc<EndpointTable>,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>> {
    let mut config = kafka.client_config();
    config
        .set("group.id", "hookline-endpoints-reader")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false");
    let consumer: StreamConsumer = config
        .create()
        .map_err(|source| DispatchError::kafka("creating the endpoints reader", source))?;
    let consumer = Arc::new(consumer);

    // Metadata and watermarks are blocking calls: keep them off the async workers.
    let reader = Arc::clone(&consumer);
    let topic_name = topic.to_owned();
    let ends = tokio::task::spawn_blocking(move || -> Result<BTreeMap<i32, i64>> {
        let timeout = Duration::from_secs(10);
        let metadata = reader
            .fetch_metadata(Some(&topic_name), timeout)
            .map_err(|source| {
                DispatchError::kafka("reading the endpoints topic's metadata", source)
            })?;
        let partitions: Vec<i32> = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic_name && t.error().is_none())
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        if partitions.is_empty() {
            return Err(DispatchError::MissingTopic(topic_name));
        }
        let mut assignment = TopicPartitionList::new();
        let mut ends = BTreeMap::new();
        for partition in partitions {
            assignment
                .add_partition_offset(&topic_name, partition, Offset::Beginning)
                .map_err(|source| DispatchError::kafka("assigning the endpoints topic", source))?;
            let (_, high) = reader
                .fetch_watermarks(&topic_name, partition, timeout)
                .map_err(|source| {
                    DispatchError::kafka("reading the endpoints topic's end", source)
                })?;
            ends.insert(partition, high);
        }
        reader
            .assign(&assignment)
            .map_err(|source| DispatchError::kafka("assigning the endpoints topic", source))?;
        Ok(ends)
    })
    .await
    .map_err(|error| DispatchError::Internal(format!("endpoints reader panicked: {error}")))??;

    // Catch up: every partition read up to the end it had when we started.
    let mut behind: BTreeMap<i32, i64> = ends.into_iter().filter(|(_, high)| *high > 0).collect();
    while !behind.is_empty() {
        let message = tokio::select! {
            () = shutdown.cancelled() => return Err(DispatchError::ShutdownDuringStartup),
            message = tokio::time::timeout(Duration::from_secs(30), consumer.recv()) => message,
        };
        let message = message
            .map_err(|_| DispatchError::Internal(format!("reading {topic} timed out")))?
            .map_err(|source| DispatchError::kafka("reading the endpoints topic", source))?;
        apply(&table, message.key(), message.payload());
        if behind
            .get(&message.partition())
            .is_some_and(|high| message.offset() + 1 >= *high)
        {
            behind.remove(&message.partition());
        }
    }
    tracing::info!(topic, endpoints = table.len(), "endpoint table loaded");

    let topic = topic.to_owned();
    Ok(tokio::spawn(async move {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                message = consumer.recv() => match message {
                    Ok(message) => apply(&table, message.key(), message.payload()),
                    Err(error) => {
                        tracing::warn!(%error, topic, "reading the endpoints topic failed");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                },
            }
        }
    }))
}

/// Applies one record of the endpoints topic: a config replaces, a tombstone removes.
fn apply(table: &EndpointTable, key: Option<&[u8]>, value: Option<&[u8]>) {
    let Some(id) = key.and_then(|key| std::str::from_utf8(key).ok()) else {
        tracing::warn!("skipping an endpoints record without a UTF-8 key");
        return;
    };
    match value {
        None => {
            table.remove(id);
            tracing::info!(endpoint = id, "endpoint removed");
        }
        Some(bytes) => match serde_json::from_slice::<EndpointConfig>(bytes) {
            Ok(config) => match table.upsert(id, config) {
                Ok(()) => tracing::info!(endpoint = id, "endpoint updated"),
                Err(error) => tracing::warn!(endpoint = id, %error, "endpoint config refused"),
            },
            Err(error) => tracing::warn!(endpoint = id, %error, "endpoint config unreadable"),
        },
    }
}
