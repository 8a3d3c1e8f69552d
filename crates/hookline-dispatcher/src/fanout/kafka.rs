//! The fan-out stage's Kafka calls: records handed to the transactional producer (waiting
//! for room in its queue), blocking transactional calls kept off the async workers, and
//! topic metadata.

use std::sync::Arc;
use std::time::Duration;

use hookline_kafka::{DeliveryFuture, FutureProducer};
use rdkafka::consumer::{ConsumerContext, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::FutureRecord;

use crate::compacted::partitions_of;
use crate::error::{DispatchError, Result};

/// How long one blocking call may take.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Hands a record to the producer, waiting for room in its queue when it is full.
pub(super) async fn send(
    producer: &FutureProducer,
    mut record: FutureRecord<'_, [u8], Vec<u8>>,
    pending: &mut Vec<DeliveryFuture>,
) -> Result<()> {
    loop {
        match producer.send_result(record) {
            Ok(future) => {
                pending.push(future);
                return Ok(());
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                if pending.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                } else {
                    settle(pending).await?;
                }
            }
            Err((source, _)) => {
                return Err(DispatchError::kafka("writing a fan-out record", source));
            }
        }
    }
}

/// Waits for every record handed to the producer to be written.
pub(super) async fn settle(pending: &mut Vec<DeliveryFuture>) -> Result<()> {
    for future in pending.drain(..) {
        match future.await {
            Ok(Ok(_)) => {}
            Ok(Err((source, _))) => {
                return Err(DispatchError::kafka("writing a fan-out record", source));
            }
            Err(_) => {
                return Err(DispatchError::kafka(
                    "writing a fan-out record",
                    KafkaError::Canceled,
                ));
            }
        }
    }
    Ok(())
}

pub(super) fn owned_headers(headers: &[(String, Vec<u8>)]) -> OwnedHeaders {
    headers.iter().fold(
        OwnedHeaders::new_with_capacity(headers.len()),
        |out, (name, value)| {
            out.insert(Header {
                key: name.as_str(),
                value: Some(value.as_slice()),
            })
        },
    )
}

/// Runs a blocking transactional call off the async workers.
pub(super) async fn blocking<T: Send + 'static>(
    producer: &FutureProducer,
    call: impl FnOnce(&FutureProducer) -> std::result::Result<T, KafkaError> + Send + 'static,
) -> Result<T> {
    let producer = producer.clone();
    tokio::task::spawn_blocking(move || call(&producer))
        .await
        .map_err(|error| DispatchError::Internal(format!("a transactional call failed: {error}")))?
        .map_err(|source| DispatchError::kafka("a fan-out transaction", source))
}

/// The partitions of `topic`, off the async workers.
pub(super) async fn partitions<C: ConsumerContext + 'static>(
    consumer: &Arc<StreamConsumer<C>>,
    topic: &str,
) -> Result<Vec<i32>> {
    let consumer = Arc::clone(consumer);
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || partitions_of(&*consumer, &topic, CALL_TIMEOUT))
        .await
        .map_err(|error| DispatchError::Internal(format!("metadata task failed: {error}")))?
}
