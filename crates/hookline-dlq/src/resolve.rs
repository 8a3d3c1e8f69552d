//! Resolving records (handled without a redrive) and adding notes: an action per selected
//! record in the actions topic, the audit trail `inspect` shows.

use crate::actions::{Action, ActionKind, ActionWriter};
use crate::error::Result;
use crate::filter::{Filter, now_ms};
use crate::reader::ReadOptions;
use crate::record::RecordRef;
use crate::select::{SelectedItem, Selection, Sources};

/// What to record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// Mark open records resolved (already redriven or resolved ones are left alone).
    Resolve,
    /// Add a note to every selected record, handled or not; the status does not change.
    Note,
}

/// What was marked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MarkReport {
    /// The records marked (or, in a dry run, that would be).
    pub marked: Vec<RecordRef>,
    /// Matching records left alone because they were already redriven or resolved.
    pub skipped_handled: u64,
    /// Records that could not be decoded, left alone.
    pub undecodable: Vec<RecordRef>,
}

/// Records `mark` with `note` by `by` (acting as `role`, when known) on each record
/// `filter` selects. Nothing is written when the DLQ or the actions topic is missing, or in
/// a dry run.
pub async fn mark(
    sources: Sources<'_>,
    filter: Filter,
    mark: Mark,
    note: Option<&str>,
    (by, role): (&str, Option<&str>),
    dry_run: bool,
) -> Result<MarkReport> {
    let kafka = sources.kafka;
    let actions_topic = sources.actions_topic.clone();
    let include_handled = mark == Mark::Note;
    let mut selection =
        Selection::open(sources, filter, ReadOptions::default(), include_handled).await?;
    let mut report = MarkReport::default();
    let mut chosen = Vec::new();
    while let Some(item) = selection.next().await? {
        match item {
            SelectedItem::Record(selected) => chosen.push(selected),
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
    if dry_run {
        report.marked = chosen.iter().map(|s| s.record.place()).collect();
        return Ok(report);
    }
    let writer = ActionWriter::new(kafka, &actions_topic).await?;
    let kind = match mark {
        Mark::Resolve => ActionKind::Resolved,
        Mark::Note => ActionKind::Note,
    };
    for selected in chosen {
        let action = Action {
            note: note.map(str::to_owned),
            event_id: Some(selected.record.envelope.event_id.clone()),
            role: role.map(str::to_owned),
            ..Action::new(kind, now_ms(), by)
        };
        let place = selected.record.place();
        writer.write(selection.log_mut(), place, action).await?;
        report.marked.push(place);
    }
    Ok(report)
}
