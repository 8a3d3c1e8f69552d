//! Archives in object storage (S3 and S3-compatible servers, GCS, Azure, a local
//! directory): [`archive_selection`] writes `<prefix>/<dlq topic>/<yyyy>/<mm>/<dd>/<run>.avro`
//! objects (Avro object containers with the writer schema embedded, one per UTC day of park
//! time), uploaded in parts; [`ArchiveRecords`] reads one object or a prefix back.
//!
//! ```no_run
//! # async fn example(mut selection: hookline_dlq::Selection) -> hookline_dlq::Result<()> {
//! use hookline_dlq::archive::store::{ArchiveConfig, ArchiveStore, ArchiveUrl, archive_selection};
//! let settings = ArchiveConfig::default().into_settings()?;
//! let url = ArchiveUrl::parse("s3://dlq-archive/prod/")?;
//! let store = ArchiveStore::open(&url, &settings, true)?;
//! let report = archive_selection(&mut selection, &store).await?;
//! for object in &report.objects {
//!     println!("{} {} records {} bytes", object.url, object.records, object.bytes);
//! }
//! # Ok(())
//! # }
//! ```

pub mod config;
mod error;
pub mod layout;
pub mod location;
mod read;
#[cfg(test)]
mod tests;
mod write;

pub use config::{ArchiveConfig, S3Credentials, StoreSettings};
pub use error::StoreError;
pub use location::{ArchiveStore, ArchiveUrl, StoreKind};
pub use read::ArchiveRecords;
pub use write::{
    ArchiveReport, ArchivedObject, PART_SIZE, PARTS_IN_FLIGHT, archive_items, archive_selection,
};
