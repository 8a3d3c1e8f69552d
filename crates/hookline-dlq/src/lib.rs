//! hookline's DLQ tooling: read the dead-letter topic through the schema registry, select
//! records with filters, redrive or resolve them (recorded in the DLQ actions topic), and
//! archive them to files that outlive the topic's retention.

pub mod actions;
pub mod archive;
mod error;
pub mod escape;
pub mod filter;
#[cfg(test)]
mod fuzz;
pub mod history;
pub mod json;
pub mod original;
pub mod reader;
pub mod record;
pub mod redrive;
pub mod resolve;
pub mod select;
pub mod view;

pub use actions::{Action, ActionKind, ActionLog, History, Status};
pub use error::{DlqError, Result};
pub use filter::{Filter, FilterError, FilterSpec, TimeBound};
pub use reader::{DlqReader, ReadOptions};
pub use record::{DlqRecord, ReadItem, RecordRef, Undecodable};
pub use redrive::{RedriveOptions, RedriveReport, Refusal, Refused, Sent, Target};
pub use resolve::{Mark, MarkReport};
pub use select::{Selected, SelectedItem, Selection, SelectionStats, Sources};
