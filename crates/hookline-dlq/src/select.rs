//! The records a command works on: the DLQ read through the registry, narrowed by a
//! filter, each with its actions; handled (redriven or resolved) records left out unless
//! asked for.

use std::sync::Arc;

use hookline_kafka::{KafkaSettings, Registry};

use crate::actions::{ActionLog, History, Status};
use crate::error::Result;
use crate::filter::Filter;
use crate::reader::{DlqReader, ReadOptions};
use crate::record::{DlqRecord, ReadItem, RecordRef, Undecodable};

/// A selected record and its actions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selected {
    /// The record.
    pub record: DlqRecord,
    /// Its actions, oldest first.
    pub history: History,
}

impl Selected {
    /// Its status.
    pub fn status(&self) -> Status {
        self.history.status()
    }
}

/// One item of a selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectedItem {
    /// A selected record.
    Record(Box<Selected>),
    /// A record in the selected places that could not be decoded.
    Undecodable(Undecodable),
}

/// The records of an archive (or any list) that `filter` selects, handled ones left out
/// unless `include_handled`; also returns how many handled ones were left out.
pub fn select_from(
    records: Vec<Selected>,
    filter: &Filter,
    include_handled: bool,
) -> (Vec<Selected>, u64) {
    let mut hidden = 0;
    let selected = records
        .into_iter()
        .filter(|s| filter.matches(&s.record))
        .filter(|s| {
            let keep = include_handled || s.status() == Status::Open;
            hidden += u64::from(!keep);
            keep
        })
        .collect();
    (selected, hidden)
}

/// Counts of what a selection read and left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SelectionStats {
    /// Records read.
    pub read: u64,
    /// Records selected.
    pub selected: u64,
    /// Matching records left out because they are redriven or resolved.
    pub hidden_handled: u64,
    /// Records that could not be decoded (all reported).
    pub undecodable: u64,
}

/// A selection being read.
pub struct Selection {
    reader: DlqReader,
    filter: Filter,
    log: ActionLog,
    include_handled: bool,
    stats: SelectionStats,
    skipped_undecodable: Vec<RecordRef>,
}

/// Where a selection reads.
#[derive(Clone, Debug)]
pub struct Sources<'a> {
    /// How to reach Kafka.
    pub kafka: &'a KafkaSettings,
    /// The registry client.
    pub registry: Arc<Registry>,
    /// The DLQ topic.
    pub dlq_topic: String,
    /// The actions topic.
    pub actions_topic: String,
}

impl Selection {
    /// Opens the DLQ and reads the actions topic. `include_handled` keeps redriven and
    /// resolved records.
    pub async fn open(
        sources: Sources<'_>,
        filter: Filter,
        options: ReadOptions,
        include_handled: bool,
    ) -> Result<Selection> {
        let reader = DlqReader::open(
            sources.kafka,
            sources.registry,
            &sources.dlq_topic,
            &filter,
            options,
        )
        .await?;
        let log = ActionLog::load(sources.kafka, &sources.actions_topic).await?;
        Ok(Selection {
            reader,
            filter,
            log,
            include_handled,
            stats: SelectionStats::default(),
            skipped_undecodable: Vec::new(),
        })
    }

    /// The next selected item; `None` at the end. A record that cannot be decoded is an
    /// item when the filter has only place criteria (partition, offsets, explicit list);
    /// otherwise it cannot be judged and is listed in [`skipped_undecodable`].
    ///
    /// [`skipped_undecodable`]: Selection::skipped_undecodable
    pub async fn next(&mut self) -> Result<Option<SelectedItem>> {
        while let Some(item) = self.reader.next().await? {
            self.stats.read += 1;
            match item {
                ReadItem::Undecodable(u) => {
                    self.stats.undecodable += 1;
                    let place = RecordRef {
                        partition: u.partition,
                        offset: u.offset,
                    };
                    if !self.filter.matches_place(place) {
                        continue;
                    }
                    if self.filter.is_place_only() {
                        return Ok(Some(SelectedItem::Undecodable(u)));
                    }
                    self.skipped_undecodable.push(place);
                }
                ReadItem::Record(record) => {
                    if !self.filter.matches(&record) {
                        continue;
                    }
                    let history = self.log.history(record.place());
                    if !self.include_handled && history.status() != Status::Open {
                        self.stats.hidden_handled += 1;
                        continue;
                    }
                    self.stats.selected += 1;
                    return Ok(Some(SelectedItem::Record(Box::new(Selected {
                        record: *record,
                        history,
                    }))));
                }
            }
        }
        Ok(None)
    }

    /// What has been read and left out so far.
    pub fn stats(&self) -> SelectionStats {
        self.stats
    }

    /// Records in the selected places that could not be decoded, so could not be matched
    /// against the other criteria.
    pub fn skipped_undecodable(&self) -> &[RecordRef] {
        &self.skipped_undecodable
    }

    /// The actions read at the start, plus those written since through it.
    pub fn log_mut(&mut self) -> &mut ActionLog {
        &mut self.log
    }

    /// The DLQ topic read.
    pub fn topic(&self) -> &str {
        self.reader.topic()
    }
}
