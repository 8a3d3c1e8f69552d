//! Reading archives back: one object, every `.avro` object under a prefix (in key order,
//! so by topic, day and run), or a local archive file; each object streamed from the store
//! and decoded on a blocking thread, record by record.

use std::collections::VecDeque;

use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use object_store::path::Path;
use tokio::sync::mpsc;
use tokio_util::io::{StreamReader, SyncIoBridge};

use super::config::StoreSettings;
use super::error::StoreError;
use super::layout::is_archive_key;
use super::location::{ArchiveStore, ArchiveUrl, StoreKind};
use crate::archive::{avro, read_archive};
use crate::error::{DlqError, Result};
use crate::select::Selected;

/// Records decoded ahead of the reader, per object.
const READ_AHEAD: usize = 256;

/// The records of an archive, in order: see [`ArchiveRecords::open`].
pub struct ArchiveRecords {
    source: Source,
}

enum Source {
    /// A local archive file (Avro or JSON lines), read whole as [`read_archive`] does.
    File(std::vec::IntoIter<Selected>),
    /// Objects of a store, read one after the other.
    Objects(Objects),
}

struct Objects {
    store: ArchiveStore,
    keys: VecDeque<Path>,
    current: Option<ObjectRead>,
}

struct ObjectRead {
    records: mpsc::Receiver<Selected>,
    task: tokio::task::JoinHandle<Result<u64>>,
    url: String,
}

impl ArchiveRecords {
    /// Opens what `url` names: a local file written by `hookline dlq archive --file`; one
    /// object (a URL not ending in `/` that names an object); or else every `.avro` object
    /// under the URL's prefix (a local directory included), listed now and read in key
    /// order. Nothing to read is an error.
    pub async fn open(url: &ArchiveUrl, settings: &StoreSettings) -> Result<ArchiveRecords> {
        if let (StoreKind::Local, Some(path)) = (url.kind, &url.local)
            && path.is_file()
        {
            let records = read_archive(path).await?;
            return Ok(ArchiveRecords {
                source: Source::File(records.into_iter()),
            });
        }
        ArchiveRecords::from_store(ArchiveStore::open(url, settings, false)?).await
    }

    /// Opens the object or prefix that `store` names, as [`open`](ArchiveRecords::open)
    /// does for a store URL.
    pub async fn from_store(store: ArchiveStore) -> Result<ArchiveRecords> {
        let keys = list(&store).await?;
        if keys.is_empty() {
            return Err(StoreError::Empty {
                url: store.url.as_str().to_owned(),
            }
            .into());
        }
        Ok(ArchiveRecords {
            source: Source::Objects(Objects {
                store,
                keys: keys.into(),
                current: None,
            }),
        })
    }

    /// The objects still to be read (all of them before the first [`next`]), for people.
    ///
    /// [`next`]: ArchiveRecords::next
    pub fn pending_objects(&self) -> Vec<String> {
        match &self.source {
            Source::File(_) => Vec::new(),
            Source::Objects(o) => o.keys.iter().map(|k| o.store.display(k)).collect(),
        }
    }

    /// The next record; `None` after the last one of the last object.
    pub async fn next(&mut self) -> Result<Option<Selected>> {
        match &mut self.source {
            Source::File(records) => Ok(records.next()),
            Source::Objects(objects) => objects.next().await,
        }
    }
}

/// The keys to read: the URL's own object, or the `.avro` objects under its prefix.
async fn list(store: &ArchiveStore) -> Result<Vec<Path>> {
    let url = store.url.as_str().to_owned();
    let call = |context: &'static str| {
        let url = url.clone();
        move |source| -> DlqError {
            StoreError::Call {
                url,
                context: context.to_owned(),
                source: Box::new(source),
            }
            .into()
        }
    };
    let prefix = &store.prefix;
    if !store.url.is_folder && !prefix.as_ref().is_empty() {
        match store.store.head(prefix).await {
            Ok(_) => return Ok(vec![prefix.clone()]),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(error) => return Err(call("looking for the object")(error)),
        }
    }
    let under = (!prefix.as_ref().is_empty()).then_some(prefix);
    let listed: Vec<_> = store
        .store
        .list(under)
        .try_collect()
        .await
        .map_err(call("listing the objects"))?;
    let mut keys: Vec<Path> = listed
        .into_iter()
        .map(|meta| meta.location)
        .filter(|key| is_archive_key(key.as_ref()))
        .collect();
    keys.sort_by(|a, b| a.as_ref().cmp(b.as_ref()));
    Ok(keys)
}

impl Objects {
    async fn next(&mut self) -> Result<Option<Selected>> {
        loop {
            if let Some(current) = &mut self.current {
                if let Some(selected) = current.records.recv().await {
                    return Ok(Some(selected));
                }
                if let Some(done) = self.current.take() {
                    done.task.await.map_err(|join| DlqError::Archive {
                        path: done.url.clone().into(),
                        item: 0,
                        problem: format!("the reader failed: {join}"),
                    })??;
                }
                continue;
            }
            let Some(key) = self.keys.pop_front() else {
                return Ok(None);
            };
            self.current = Some(start(&self.store, &key).await?);
        }
    }
}

/// Starts streaming one object into a decoder on a blocking thread.
async fn start(store: &ArchiveStore, key: &Path) -> Result<ObjectRead> {
    let url = store.display(key);
    let got = store.store.get(key).await.map_err(|source| {
        DlqError::from(StoreError::Call {
            url: url.clone(),
            context: "reading the object".to_owned(),
            source: Box::new(source),
        })
    })?;
    let bytes = got.into_stream().map_err(std::io::Error::other);
    let input = SyncIoBridge::new(StreamReader::new(bytes));
    let (send, records) = mpsc::channel(READ_AHEAD);
    let task_url = url.clone();
    let task = tokio::task::spawn_blocking(move || {
        let input = std::io::BufReader::new(input);
        avro::read_each(std::path::Path::new(&task_url), input, |selected| {
            send.blocking_send(selected).is_ok()
        })
    });
    Ok(ObjectRead { records, task, url })
}
