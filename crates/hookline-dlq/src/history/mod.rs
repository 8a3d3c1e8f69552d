//! The history of one event from the attempt log (`<events>.attempts`): [`lookup`] reads the
//! one partition its id hashes to, [`Story`] orders its records into steps (published, fanned
//! out, each attempt and its answer, retries by tier, deferrals, parks, redrives, delivered)
//! and prints them as text or JSON, and [`Tail`] follows new records of every event. Here,
//! beside the DLQ tooling, so that the CLI and the console share one reader.

mod lookup;
mod story;
mod tail;

pub use lookup::{Lookup, LookupOptions, lookup};
pub use story::{Step, StepKind, Story};
pub use tail::{Tail, TailFilter, tail_json, tail_line};
