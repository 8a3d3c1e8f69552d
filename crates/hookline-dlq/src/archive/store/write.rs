//! Writing selected records to objects: one Avro object container per UTC day of park time,
//! uploaded in parts while it grows, and visible only once complete (a failed run aborts
//! its uploads, so no part of an object is left).

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use apache_avro::{Schema, Writer};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use jiff::Timestamp;
use jiff::civil::Date;
use object_store::path::Path;
use object_store::{ObjectStoreExt, WriteMultipart};

use super::error::StoreError;
use super::layout::{RunName, object_key, park_day};
use super::location::ArchiveStore;
use crate::archive::avro;
use crate::error::Result;
use crate::record::RecordRef;
use crate::select::{Selected, SelectedItem, Selection};

/// The size of every uploaded part but the last: S3's smallest, and all parts of one size,
/// as some S3-compatible stores require. An object's memory is a part being filled plus
/// at most [`PARTS_IN_FLIGHT`] being sent.
pub const PART_SIZE: usize = 5 * 1024 * 1024;

/// Parts of one object being uploaded at once.
pub const PARTS_IN_FLIGHT: usize = 2;

/// What an archive run wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArchiveReport {
    /// The run's name: every object it wrote is `<run>.avro`.
    pub run: String,
    /// The objects written, in key order (so by day).
    pub objects: Vec<ArchivedObject>,
    /// Records written, in all objects.
    pub records: u64,
    /// Bytes written, in all objects.
    pub bytes: u64,
    /// Matching records left out because they are redriven or resolved.
    pub hidden_handled: u64,
    /// Records that could not be decoded, so were not archived.
    pub undecodable: Vec<RecordRef>,
}

/// One object written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchivedObject {
    /// Its key in the bucket.
    pub key: String,
    /// Where it is, for people: `s3://bucket/key` or a local path.
    pub url: String,
    /// The UTC day its records were parked; `None` for the `undated` folder.
    pub day: Option<Date>,
    /// Records in it.
    pub records: u64,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Archives what `selection` selects (read to its end) to `store`: one object per UTC day
/// of park time, under `<prefix>/<dlq topic>/<yyyy>/<mm>/<dd>/`, named after this run so
/// that a second run adds objects and never replaces one. On an error, the uploads of this
/// run that were not complete are aborted, and the error is returned; objects already
/// complete stay. Redriven and resolved records are left out unless the selection was
/// opened to include them.
pub async fn archive_selection(
    selection: &mut Selection,
    store: &ArchiveStore,
) -> Result<ArchiveReport> {
    let topic = selection.topic().to_owned();
    let items = futures::stream::unfold(&mut *selection, |s| async move {
        match s.next().await {
            Ok(Some(item)) => Some((Ok(item), s)),
            Ok(None) => None,
            Err(error) => Some((Err(error), s)),
        }
    });
    let mut report = archive_items(items, store, &topic).await?;
    report.hidden_handled = selection.stats().hidden_handled;
    report
        .undecodable
        .extend_from_slice(selection.skipped_undecodable());
    Ok(report)
}

/// Archives `items` (the records of `dlq_topic`) to `store`, as [`archive_selection`]
/// does; stops at the first error of `items`, aborting the uploads.
pub async fn archive_items(
    items: impl Stream<Item = Result<SelectedItem>>,
    store: &ArchiveStore,
    dlq_topic: &str,
) -> Result<ArchiveReport> {
    let schema = avro::archive_schema(std::path::Path::new(store.url.as_str()))?;
    let run = RunName::new(Timestamp::now());
    let mut open = BTreeMap::new();
    let mut undecodable = Vec::new();
    let filled = fill(
        items,
        store,
        dlq_topic,
        &run,
        &schema,
        &mut open,
        &mut undecodable,
    )
    .await;
    if let Err(error) = filled {
        abort_all(open.into_values()).await;
        return Err(error);
    }
    let mut report = ArchiveReport {
        run: run.as_str().to_owned(),
        undecodable,
        ..ArchiveReport::default()
    };
    let mut objects = open.into_values();
    while let Some(object) = objects.next() {
        match object.finish().await {
            Ok(done) => {
                report.records += done.records;
                report.bytes += done.bytes;
                report.objects.push(done);
            }
            Err(error) => {
                abort_all(objects).await;
                if !report.objects.is_empty() {
                    let written: Vec<&str> =
                        report.objects.iter().map(|o| o.url.as_str()).collect();
                    tracing::warn!(
                        written = %written.join(", "),
                        "archive run {} failed after completing some objects; they stay",
                        run.as_str()
                    );
                }
                return Err(error);
            }
        }
    }
    report.objects.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(report)
}

async fn fill<'s>(
    items: impl Stream<Item = Result<SelectedItem>>,
    store: &ArchiveStore,
    dlq_topic: &str,
    run: &RunName,
    schema: &'s Schema,
    open: &mut BTreeMap<Option<Date>, DayObject<'s>>,
    undecodable: &mut Vec<RecordRef>,
) -> Result<()> {
    let mut items = std::pin::pin!(items);
    while let Some(item) = items.next().await {
        match item? {
            SelectedItem::Record(selected) => {
                let day = park_day(selected.record.envelope.error_timestamp_ms);
                let object = match open.entry(day) {
                    Entry::Occupied(o) => o.into_mut(),
                    Entry::Vacant(v) => {
                        let key = object_key(store.prefix.as_ref(), dlq_topic, day, run);
                        v.insert(DayObject::start(store, key, day, schema, dlq_topic).await?)
                    }
                };
                object.append(&selected).await?;
            }
            SelectedItem::Undecodable(u) => undecodable.push(RecordRef {
                partition: u.partition,
                offset: u.offset,
            }),
        }
    }
    Ok(())
}

async fn abort_all<'s>(objects: impl IntoIterator<Item = DayObject<'s>>) {
    for object in objects {
        object.abort().await;
    }
}

/// One object being written: the Avro writer fills a buffer, sent as a part when full.
struct DayObject<'s> {
    key: Path,
    url: String,
    day: Option<Date>,
    avro: Writer<'s, Vec<u8>>,
    upload: WriteMultipart,
    records: u64,
    bytes: u64,
}

impl<'s> DayObject<'s> {
    async fn start(
        store: &ArchiveStore,
        key: String,
        day: Option<Date>,
        schema: &'s Schema,
        dlq_topic: &str,
    ) -> Result<DayObject<'s>> {
        let key = Path::from(key);
        let url = store.display(&key);
        let upload = store
            .store
            .put_multipart(&key)
            .await
            .map_err(call_error(&url, "starting the upload"))?;
        let avro = avro::start(std::path::Path::new(&url), schema, Vec::new(), dlq_topic);
        let avro = match avro {
            Ok(a) => a,
            Err(error) => {
                let mut upload = upload;
                let _ = upload.abort().await;
                return Err(error);
            }
        };
        Ok(DayObject {
            key,
            url,
            day,
            avro,
            upload: WriteMultipart::new_with_chunk_size(upload, PART_SIZE),
            records: 0,
            bytes: 0,
        })
    }

    async fn append(&mut self, selected: &Selected) -> Result<()> {
        avro::append(std::path::Path::new(&self.url), &mut self.avro, selected)?;
        self.records += 1;
        if self.avro.get_ref().len() >= PART_SIZE {
            let filled = std::mem::take(self.avro.get_mut());
            self.bytes += filled.len() as u64;
            self.upload.put(Bytes::from(filled));
            self.upload
                .wait_for_capacity(PARTS_IN_FLIGHT)
                .await
                .map_err(call_error(&self.url, "uploading a part"))?;
        }
        Ok(())
    }

    /// Sends the rest and completes the upload (which aborts it when that fails).
    async fn finish(self) -> Result<ArchivedObject> {
        let DayObject {
            key,
            url,
            day,
            avro,
            mut upload,
            records,
            mut bytes,
        } = self;
        let rest = match avro::end(std::path::Path::new(&url), avro) {
            Ok(rest) => rest,
            Err(error) => {
                let _ = upload.abort().await;
                return Err(error);
            }
        };
        bytes += rest.len() as u64;
        upload.put(Bytes::from(rest));
        upload
            .finish()
            .await
            .map_err(call_error(&url, "completing the upload"))?;
        Ok(ArchivedObject {
            key: key.as_ref().to_owned(),
            url,
            day,
            records,
            bytes,
        })
    }

    async fn abort(self) {
        if let Err(error) = self.upload.abort().await {
            tracing::warn!(object = %self.url, %error, "could not abort an archive upload; its parts may stay until the bucket's lifecycle rule removes them");
        }
    }
}

fn call_error(url: &str, context: &str) -> impl FnOnce(object_store::Error) -> crate::DlqError {
    let url = url.to_owned();
    let context = context.to_owned();
    move |source| {
        StoreError::Call {
            url,
            context,
            source: Box::new(source),
        }
        .into()
    }
}
