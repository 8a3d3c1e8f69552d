//! The consumer's rebalance hooks: before partitions are taken away, their in-flight
//! deliveries drain (within a deadline; what did not drain is cancelled) and the finished
//! offsets are committed; partitions handed (back) to this consumer are resumed, as
//! librdkafka keeps an application's pause across a revoke and a new assign
//! (confluentinc/librdkafka#1849) while hookline forgot it on revoke.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use crate::offsets::PartitionKey;
use crate::shared::Shared;

/// The dispatcher's consumer context.
pub(crate) struct DispatchContext {
    pub shared: Arc<Shared>,
    pub drain_timeout: Duration,
}

impl ClientContext for DispatchContext {}

impl ConsumerContext for DispatchContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(list) => {
                let keys: Vec<PartitionKey> = list
                    .elements()
                    .iter()
                    .map(|element| (element.topic().into(), element.partition()))
                    .collect();
                let drain = || self.shared.wait_drained(&keys, self.drain_timeout);
                // This runs inside the poll of the consumer's task; let the runtime move its
                // other work elsewhere while we wait.
                let drained = match tokio::runtime::Handle::try_current() {
                    Ok(handle)
                        if handle.runtime_flavor()
                            == tokio::runtime::RuntimeFlavor::MultiThread =>
                    {
                        tokio::task::block_in_place(drain)
                    }
                    _ => drain(),
                };
                if !drained {
                    tracing::warn!(
                        partitions = keys.len(),
                        "revoked partitions still had deliveries running; they are cancelled \
                         and delivered again by the new owner"
                    );
                }
                commit(consumer);
                self.shared.forget(&keys);
                tracing::info!(partitions = keys.len(), "partitions revoked");
            }
            Rebalance::Assign(_) => {}
            Rebalance::Error(error) => tracing::warn!(%error, "rebalance error"),
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(list) = rebalance {
            // Nothing of ours is paused on a partition just assigned: clear any pause
            // librdkafka kept from an earlier assignment.
            if let Err(error) = consumer.resume(list) {
                tracing::warn!(%error, "resuming assigned partitions failed");
            }
            let keys: Vec<PartitionKey> = list
                .elements()
                .iter()
                .map(|element| (element.topic().into(), element.partition()))
                .collect();
            self.shared.forget(&keys);
            tracing::info!(partitions = list.count(), "partitions assigned");
            self.shared.readiness.set_consuming(true);
        }
    }
}

/// Commits the stored offsets now; having nothing to commit is fine.
pub(crate) fn commit<C: Consumer<X>, X: ConsumerContext>(consumer: &C) {
    match consumer.commit_consumer_state(CommitMode::Sync) {
        Ok(()) => {}
        Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
        Err(error) => tracing::warn!(%error, "committing offsets failed"),
    }
}
