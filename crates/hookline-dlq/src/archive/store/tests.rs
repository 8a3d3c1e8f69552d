//! The object-store archive against object_store's in-memory store and a local directory.

use std::sync::Arc;

use futures::TryStreamExt;
use hookline_core::envelope::ErrorReason;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use super::*;
use crate::actions::{Action, ActionKind, History};
use crate::error::DlqError;
use crate::record::fixtures::record;
use crate::select::{Selected, SelectedItem};

const DAY_MS: i64 = 86_400_000;
/// 2026-12-01T23:59:59.000Z.
const LATE_ON_THE_FIRST: i64 = 1_796_169_599_000;

fn selected(offset: i64, at_ms: i64) -> Selected {
    Selected {
        record: record(0, offset, "ep-a", ErrorReason::RetriesExhausted, at_ms),
        history: History(vec![Action::new(ActionKind::Note, 5, "ops")]),
    }
}

fn in_memory(url: &str) -> (ArchiveStore, Arc<InMemory>) {
    let memory = Arc::new(InMemory::new());
    let url = ArchiveUrl::parse(url).expect("url");
    let store = ArchiveStore {
        store: memory.clone(),
        prefix: Path::from(url.prefix.as_str()),
        url,
    };
    (store, memory)
}

async fn keys(store: &dyn ObjectStore) -> Vec<String> {
    let listed: Vec<_> = store.list(None).try_collect().await.expect("list");
    let mut keys: Vec<String> = listed.into_iter().map(|m| m.location.to_string()).collect();
    keys.sort();
    keys
}

fn items(records: &[Selected]) -> impl futures::Stream<Item = crate::Result<SelectedItem>> {
    futures::stream::iter(
        records
            .iter()
            .map(|s| Ok(SelectedItem::Record(Box::new(s.clone()))))
            .collect::<Vec<_>>(),
    )
}

async fn read_all(store: ArchiveStore) -> Vec<Selected> {
    let mut records = ArchiveRecords::from_store(store).await.expect("opens");
    let mut out = Vec::new();
    while let Some(s) = records.next().await.expect("reads") {
        out.push(s);
    }
    out
}

#[test]
fn the_fixture_time_is_late_on_the_first() {
    assert_eq!(
        layout::park_day(LATE_ON_THE_FIRST).map(|d| d.to_string()),
        Some("2026-12-01".to_owned())
    );
}

#[tokio::test]
async fn records_land_in_one_object_per_utc_day_and_read_back_in_key_order() {
    let (store, memory) = in_memory("s3://bucket/pre/fix/");
    // Parked a second before and a second after midnight UTC, interleaved, and a day later.
    let records = [
        selected(0, LATE_ON_THE_FIRST),
        selected(1, LATE_ON_THE_FIRST + 2_000),
        selected(2, LATE_ON_THE_FIRST + 500),
        selected(3, LATE_ON_THE_FIRST + DAY_MS + 2_000),
    ];
    let report = archive_items(items(&records), &store, "hooks.dlq")
        .await
        .expect("archived");
    assert_eq!(report.records, 4);
    let folders: Vec<String> = report
        .objects
        .iter()
        .map(|o| o.key.rsplit_once('/').expect("a folder").0.to_owned())
        .collect();
    assert_eq!(
        folders,
        [
            "pre/fix/hooks.dlq/2026/12/01",
            "pre/fix/hooks.dlq/2026/12/02",
            "pre/fix/hooks.dlq/2026/12/03"
        ]
    );
    let counts: Vec<u64> = report.objects.iter().map(|o| o.records).collect();
    assert_eq!(counts, [2, 1, 1]);
    for object in &report.objects {
        assert!(object.key.ends_with(&format!("/{}.avro", report.run)));
        assert_eq!(object.url, format!("s3://bucket/{}", object.key));
        let meta = memory
            .head(&Path::from(object.key.as_str()))
            .await
            .expect("there");
        assert_eq!(meta.size, object.bytes);
    }
    assert_eq!(
        report.bytes,
        report.objects.iter().map(|o| o.bytes).sum::<u64>()
    );
    assert_eq!(
        keys(memory.as_ref()).await,
        report
            .objects
            .iter()
            .map(|o| o.key.clone())
            .collect::<Vec<_>>()
    );

    let back = read_all(store.clone()).await;
    let expected = [&records[0], &records[2], &records[1], &records[3]].map(Clone::clone);
    assert_eq!(back, expected, "by day, each day in the order written");

    // One object by its own URL.
    let (mut one, _) = in_memory(&format!("s3://bucket/{}", report.objects[1].key));
    one.store = memory.clone() as Arc<dyn ObjectStore>;
    assert_eq!(read_all(one).await, [records[1].clone()]);
}

#[tokio::test]
async fn a_second_run_adds_objects_and_leaves_the_first_alone() {
    let (store, memory) = in_memory("s3://bucket/p/");
    let records = [selected(0, LATE_ON_THE_FIRST)];
    let first = archive_items(items(&records), &store, "t.dlq")
        .await
        .expect("first");
    let before = memory
        .get(&Path::from(first.objects[0].key.as_str()))
        .await
        .expect("there")
        .bytes()
        .await
        .expect("bytes");
    let second = archive_items(items(&records), &store, "t.dlq")
        .await
        .expect("second");
    assert_ne!(first.objects[0].key, second.objects[0].key);
    assert_eq!(keys(memory.as_ref()).await.len(), 2);
    let after = memory
        .get(&Path::from(first.objects[0].key.as_str()))
        .await
        .expect("still there")
        .bytes()
        .await
        .expect("bytes");
    assert_eq!(before, after);
    assert_eq!(read_all(store).await.len(), 2, "both runs read back");
}

/// `count` records parked on the first, each with 20 KB of pseudo-random payload that
/// deflate cannot shrink.
fn incompressible(count: i64) -> Vec<Selected> {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..count)
        .map(|offset| {
            let mut s = selected(offset, LATE_ON_THE_FIRST);
            s.record.envelope.original_payload_bytes = (0..20_000)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            s
        })
        .collect()
}

/// Payloads of random bytes (so deflate cannot shrink them) make an object of several parts.
#[tokio::test]
async fn a_large_archive_is_uploaded_in_parts_and_streams_back() {
    let (store, memory) = in_memory("s3://bucket/big/");
    let records = incompressible(700);
    let report = archive_items(items(&records), &store, "t.dlq")
        .await
        .expect("archived");
    assert_eq!(report.objects.len(), 1);
    assert!(
        report.bytes > 2 * PART_SIZE as u64,
        "{} bytes: more than two parts",
        report.bytes
    );
    assert_eq!(keys(memory.as_ref()).await.len(), 1);
    assert_eq!(read_all(store).await, records);
}

#[tokio::test]
async fn a_failed_read_aborts_every_upload_and_leaves_no_object() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = ArchiveUrl::parse(&format!("file://{}/", dir.path().display())).expect("url");
    let store = ArchiveStore::open(&url, &StoreSettings::default(), true).expect("store");
    let records = [
        selected(0, LATE_ON_THE_FIRST),
        selected(1, LATE_ON_THE_FIRST + DAY_MS),
    ];
    let failing = futures::stream::iter(
        records
            .iter()
            .map(|s| Ok(SelectedItem::Record(Box::new(s.clone()))))
            .chain([Err(DlqError::ReadTimeout {
                topic: "t.dlq".into(),
                partition: 0,
                position: 2,
                high: 9,
            })])
            .collect::<Vec<_>>(),
    );
    let error = archive_items(failing, &store, "t.dlq")
        .await
        .expect_err("fails");
    assert!(matches!(error, DlqError::ReadTimeout { .. }), "{error}");
    let files: Vec<_> = walk(dir.path());
    assert!(files.is_empty(), "nothing is left behind: {files:?}");

    // The same selection without the failure is written there.
    let report = archive_items(items(&records), &store, "t.dlq")
        .await
        .expect("archived");
    assert_eq!(walk(dir.path()).len(), 2);
    assert!(dir.path().join(&report.objects[0].key).is_file());
    assert_eq!(
        report.objects[0].url,
        dir.path()
            .join(&report.objects[0].key)
            .display()
            .to_string()
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

#[tokio::test]
async fn nothing_to_read_and_other_objects_are_told_apart() {
    let (store, memory) = in_memory("s3://bucket/p/");
    memory
        .put(&Path::from("p/notes.txt"), "not an archive".into())
        .await
        .expect("put");
    let error = ArchiveRecords::from_store(store.clone())
        .await
        .err()
        .expect("nothing to read");
    assert_eq!(
        error.to_string(),
        "archive s3://bucket/p/: no .avro objects there"
    );
    memory
        .put(
            &Path::from("p/t.dlq/2026/12/01/bad.avro"),
            "Obj\x01 garbage".into(),
        )
        .await
        .expect("put");
    let mut records = ArchiveRecords::from_store(store).await.expect("one object");
    assert_eq!(
        records.pending_objects(),
        ["s3://bucket/p/t.dlq/2026/12/01/bad.avro"]
    );
    let error = records.next().await.expect_err("not an archive");
    assert!(
        error
            .to_string()
            .contains("s3://bucket/p/t.dlq/2026/12/01/bad.avro"),
        "{error}"
    );
}

#[tokio::test]
async fn an_empty_selection_writes_nothing() {
    let (store, memory) = in_memory("s3://bucket/p/");
    let report = archive_items(items(&[]), &store, "t.dlq")
        .await
        .expect("nothing");
    assert_eq!(
        (report.objects.len(), report.records, report.bytes),
        (0, 0, 0)
    );
    assert!(keys(memory.as_ref()).await.is_empty());
}

/// An in-memory store whose uploads count their aborts, and whose parts fail when asked.
#[derive(Debug)]
struct Watched {
    inner: InMemory,
    aborted: Arc<std::sync::atomic::AtomicUsize>,
    fail_parts: bool,
}

impl std::fmt::Display for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watched")
    }
}

#[derive(Debug)]
struct WatchedUpload {
    inner: Box<dyn object_store::MultipartUpload>,
    aborted: Arc<std::sync::atomic::AtomicUsize>,
    fail_parts: bool,
}

#[async_trait::async_trait]
impl object_store::MultipartUpload for WatchedUpload {
    fn put_part(&mut self, data: object_store::PutPayload) -> object_store::UploadPart {
        if self.fail_parts {
            return Box::pin(async {
                Err(object_store::Error::Generic {
                    store: "Watched",
                    source: "the part was refused".into(),
                })
            });
        }
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<object_store::PutResult> {
        self.inner.complete().await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.aborted
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.abort().await
    }
}

#[async_trait::async_trait]
impl ObjectStore for Watched {
    async fn put_opts(
        &self,
        location: &Path,
        payload: object_store::PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(WatchedUpload {
            inner,
            aborted: self.aborted.clone(),
            fail_parts: self.fail_parts,
        }))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<'static, object_store::Result<Path>>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&Path>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&Path>,
    ) -> object_store::Result<object_store::ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

fn watched(fail_parts: bool) -> (ArchiveStore, Arc<Watched>) {
    let watched = Arc::new(Watched {
        inner: InMemory::new(),
        aborted: Arc::default(),
        fail_parts,
    });
    let url = ArchiveUrl::parse("s3://bucket/p/").expect("url");
    let store = ArchiveStore {
        store: watched.clone(),
        prefix: Path::from("p"),
        url,
    };
    (store, watched)
}

fn aborted(watched: &Watched) -> usize {
    watched.aborted.load(std::sync::atomic::Ordering::SeqCst)
}

#[tokio::test]
async fn a_failed_read_aborts_the_upload_of_every_open_day() {
    let (store, watched) = watched(false);
    let failing = futures::stream::iter(vec![
        Ok(SelectedItem::Record(Box::new(selected(
            0,
            LATE_ON_THE_FIRST,
        )))),
        Ok(SelectedItem::Record(Box::new(selected(
            1,
            LATE_ON_THE_FIRST + DAY_MS,
        )))),
        Err(DlqError::ReadTimeout {
            topic: "t.dlq".into(),
            partition: 0,
            position: 2,
            high: 9,
        }),
    ]);
    let error = archive_items(failing, &store, "t.dlq")
        .await
        .expect_err("fails");
    assert!(matches!(error, DlqError::ReadTimeout { .. }), "{error}");
    assert_eq!(aborted(&watched), 2, "both days' uploads are aborted");
    assert!(keys(&watched.inner).await.is_empty());
}

#[tokio::test]
async fn a_refused_part_fails_the_run_and_aborts_its_uploads() {
    let (store, watched) = watched(true);
    // Enough bytes for a part to be sent before the end.
    let records = incompressible(400);
    let error = archive_items(items(&records), &store, "t.dlq")
        .await
        .expect_err("refused");
    let text = error.to_string();
    assert!(
        text.starts_with("archive s3://bucket/p/t.dlq/2026/12/01/")
            && (text.ends_with(": uploading a part") || text.ends_with(": completing the upload")),
        "{text}"
    );
    assert_eq!(aborted(&watched), 1);
    assert!(keys(&watched.inner).await.is_empty());
}
