//! Running a redrive: select, check the target, then re-publish each record and record the
//! action once Kafka acknowledged the re-publish.

use std::time::Duration;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::time::Instant;

use super::{RedriveOptions, RedriveReport, Refusal, Refused, Sent, outgoing, rate_interval};
use crate::actions::{Action, ActionKind, ActionWriter};
use crate::error::{DlqError, Result};
use crate::filter::{Filter, now_ms};
use crate::reader::{ReadOptions, topic_exists};
use crate::record::RecordRef;
use crate::select::{SelectedItem, Selection, Sources};

/// Progress of a redrive, for a progress bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedriveEvent<'a> {
    /// The selection is read: this many records will go.
    Planned {
        /// How many.
        total: usize,
    },
    /// One record went (acknowledged and recorded).
    Sent {
        /// How many so far.
        done: usize,
        /// Out of.
        total: usize,
        /// Which record.
        place: RecordRef,
        /// Where it went, `topic/partition/offset`.
        target: &'a str,
    },
}

/// Redrives the open records `filter` selects from `sources`; already redriven or resolved
/// ones are skipped, so a second identical redrive sends nothing, and those that cannot be
/// re-published unchanged are refused (see [`Refusal`]), in a dry run too. Nothing is sent
/// when the DLQ, the target or (unless a dry run) the actions topic is missing.
pub async fn redrive(
    sources: Sources<'_>,
    filter: Filter,
    options: &RedriveOptions,
    mut progress: impl FnMut(RedriveEvent<'_>),
) -> Result<RedriveReport> {
    let kafka = sources.kafka;
    let dlq_topic = sources.dlq_topic.clone();
    let actions_topic = sources.actions_topic.clone();
    let mut selection = Selection::open(sources, filter, ReadOptions::default(), false).await?;
    let mut report = RedriveReport::default();
    let mut planned = Vec::new();
    while let Some(item) = selection.next().await? {
        match item {
            SelectedItem::Record(selected) => match Refusal::of(&selected.record) {
                Some(why) => report.refused.push(Refused::new(&selected.record, why)),
                None => planned.push(selected.record),
            },
            SelectedItem::Undecodable(u) => report.undecodable.push(RecordRef {
                partition: u.partition,
                offset: u.offset,
            }),
        }
    }
    report.skipped_handled = selection.stats().hidden_handled;
    report
        .undecodable
        .extend_from_slice(selection.skipped_undecodable());
    let target_topic = options.target.topic(&options.events_topic);
    if !topic_exists(kafka, &target_topic).await? {
        return Err(DlqError::TopicNotFound {
            topic: target_topic,
        });
    }
    let total = planned.len();
    progress(RedriveEvent::Planned { total });
    if options.dry_run {
        report.sent = planned
            .iter()
            .map(|r| Sent::new(r, target_topic.clone()))
            .collect();
        return Ok(report);
    }
    let writer = ActionWriter::new(kafka, &actions_topic).await?;
    let producer: FutureProducer = kafka
        .producer_config()
        .create()
        .map_err(DlqError::kafka("creating the redrive producer"))?;
    let interval = options
        .rate_per_s
        .map(|rate| rate_interval(rate).ok_or(DlqError::InvalidRate { rate }))
        .transpose()?;
    let mut next_slot = Instant::now();
    for (index, record) in planned.iter().enumerate() {
        if let Some(interval) = interval {
            tokio::time::sleep_until(next_slot).await;
            next_slot = Instant::now().max(next_slot) + interval;
        }
        let now = now_ms();
        let out = outgoing(record, &dlq_topic, options, now);
        let mut headers = OwnedHeaders::new_with_capacity(out.headers.len());
        for (key, value) in &out.headers {
            headers = headers.insert(Header {
                key,
                value: Some(value),
            });
        }
        let mut send: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&out.topic)
            .payload(out.value.as_slice())
            .headers(headers);
        if let Some(key) = &out.key {
            send = send.key(key.as_slice());
        }
        let delivered =
            producer
                .send(send, Duration::from_secs(30))
                .await
                .map_err(|(source, _)| DlqError::Send {
                    context: format!("re-publishing {} to {}", record.place(), out.topic),
                    source,
                })?;
        let target = format!("{}/{}/{}", out.topic, delivered.partition, delivered.offset);
        let action = Action {
            target: Some(target.clone()),
            event_id: Some(record.envelope.event_id.clone()),
            role: options.role.clone(),
            ..Action::new(ActionKind::Redriven, now, &options.by)
        };
        writer
            .write(selection.log_mut(), record.place(), action)
            .await?;
        report.sent.push(Sent::new(record, target.clone()));
        progress(RedriveEvent::Sent {
            done: index + 1,
            total,
            place: record.place(),
            target: &target,
        });
    }
    Ok(report)
}
