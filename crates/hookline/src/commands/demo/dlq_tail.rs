//! Follows the DLQ from its current end, decoding each new record through the registry, so
//! the demo can tell which of its events were parked and why.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use hookline_dlq::{DlqRecord, ReadItem};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::{Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

use crate::commands::Context;

/// The DLQ records that arrived since [`DlqTail::start`].
pub struct DlqTail {
    records: Arc<Mutex<Vec<DlqRecord>>>,
    stop: CancellationToken,
}

impl DlqTail {
    /// Starts following `topic` from its end.
    pub async fn start(context: &Context, topic: &str) -> anyhow::Result<Self> {
        let mut config = context.kafka.client_config();
        config
            .set("group.id", "hookline-demo-dlq-tail")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false");
        let consumer: StreamConsumer = config.create().context("creating the DLQ reader")?;
        let consumer = Arc::new(consumer);
        let reader = Arc::clone(&consumer);
        let name = topic.to_owned();
        tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            let metadata = reader
                .fetch_metadata(Some(&name), Duration::from_secs(10))
                .with_context(|| format!("reading the metadata of {name}"))?;
            let mut assignment = TopicPartitionList::new();
            for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
                let (_, high) = reader
                    .fetch_watermarks(&name, partition.id(), Duration::from_secs(10))
                    .with_context(|| format!("reading the end of {name}"))?;
                assignment.add_partition_offset(&name, partition.id(), Offset::Offset(high))?;
            }
            reader.assign(&assignment).context("assigning the DLQ")?;
            Ok(())
        })
        .await
        .context("the DLQ reader failed")??;

        let registry = context.registry()?;
        let records = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let (sink, until) = (Arc::clone(&records), stop.clone());
        tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    () = until.cancelled() => return,
                    message = consumer.recv() => message,
                };
                let Ok(message) = message else { continue };
                match hookline_dlq::reader::decode(&registry, &message.detach()).await {
                    Ok(ReadItem::Record(record)) => {
                        sink.lock().unwrap_or_else(|p| p.into_inner()).push(*record);
                    }
                    Ok(ReadItem::Undecodable(undecodable)) => {
                        tracing::warn!(error = undecodable.error, "undecodable DLQ record");
                    }
                    Err(error) => tracing::warn!(%error, "reading the DLQ failed"),
                }
            }
        });
        Ok(DlqTail { records, stop })
    }

    /// The records read so far.
    pub fn records(&self) -> Vec<DlqRecord> {
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Stops following.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}
