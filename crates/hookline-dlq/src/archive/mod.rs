//! Archives of DLQ records that outlive the topic's retention: an Avro object container
//! file with its writer schema embedded, or JSON lines; both read back by [`read_archive`].
//! File I/O runs on a blocking thread, fed through a channel. [`store`] writes the Avro
//! archive to object storage (S3, GCS, Azure, a local directory) and reads it back.

pub mod avro;
pub mod store;

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use tokio::sync::mpsc;

use crate::error::{DlqError, Result};
use crate::json::{from_json, to_json};
use crate::select::Selected;

/// How an archive is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// An Avro object container file (deflate blocks, schema embedded).
    Avro,
    /// One JSON object per line ([`crate::json`]).
    Jsonl,
}

impl Format {
    /// The format a file name suggests: `.jsonl`, `.ndjson` or `.json` for JSON lines,
    /// anything else Avro.
    pub fn from_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl" | "ndjson" | "json") => Format::Jsonl,
            _ => Format::Avro,
        }
    }
}

/// What the file writer is sent.
enum Message {
    Record(Box<Selected>),
    Finish,
}

/// Writes an archive as records arrive; the file appears only when [`finish`]ed (dropped
/// before that, nothing is left behind).
///
/// [`finish`]: ArchiveWriter::finish
pub struct ArchiveWriter {
    records: mpsc::Sender<Message>,
    task: tokio::task::JoinHandle<Result<u64>>,
    path: PathBuf,
}

impl ArchiveWriter {
    /// Starts writing `path` (refused when it exists) in `format`.
    pub fn create(path: &Path, format: Format, dlq_topic: &str) -> Result<ArchiveWriter> {
        if path.exists() {
            return Err(DlqError::FileExists {
                path: path.to_owned(),
            });
        }
        // The partial file is made here, before the writer thread starts, so that a
        // file that cannot be made is refused at once and a dropped writer always has
        // one file of its own to remove.
        let partial = partial_path(path);
        let file = File::create_new(&partial).map_err(DlqError::io(&partial))?;
        let (records, mut incoming) = mpsc::channel::<Message>(256);
        let final_path = path.to_owned();
        let topic = dlq_topic.to_owned();
        let task = tokio::task::spawn_blocking(move || {
            let written = (|| {
                let mut out = BufWriter::new(file);
                let mut finished = false;
                let records = std::iter::from_fn(|| match incoming.blocking_recv() {
                    Some(Message::Record(r)) => Some(*r),
                    Some(Message::Finish) => {
                        finished = true;
                        None
                    }
                    None => None,
                });
                let count = match format {
                    Format::Avro => avro::write(&final_path, &mut out, &topic, records)?,
                    Format::Jsonl => write_jsonl(&final_path, &mut out, records)?,
                };
                if !finished {
                    return Err(DlqError::Archive {
                        path: final_path.clone(),
                        item: 0,
                        problem: "stopped before the end; nothing written".into(),
                    });
                }
                let file = out
                    .into_inner()
                    .map_err(|e| DlqError::io(&final_path)(e.into_error()))?;
                file.sync_all().map_err(DlqError::io(&final_path))?;
                if final_path.exists() {
                    return Err(DlqError::FileExists {
                        path: final_path.clone(),
                    });
                }
                std::fs::rename(&partial, &final_path).map_err(DlqError::io(&final_path))?;
                Ok(count)
            })();
            if written.is_err() {
                let _ = std::fs::remove_file(&partial);
            }
            written
        });
        Ok(ArchiveWriter {
            records,
            task,
            path: path.to_owned(),
        })
    }

    /// Adds a record.
    pub async fn write(&self, selected: Selected) -> Result<()> {
        let message = Message::Record(Box::new(selected));
        if self.records.send(message).await.is_err() {
            // The writer stopped early: its error comes from `finish`.
            return Err(DlqError::Archive {
                path: self.path.clone(),
                item: 0,
                problem: "the file writer stopped (see the error from finishing)".into(),
            });
        }
        Ok(())
    }

    /// Finishes the file and moves it into place; returns how many records it holds.
    pub async fn finish(self) -> Result<u64> {
        // A writer that stopped early has its own error, returned below.
        let _ = self.records.send(Message::Finish).await;
        self.task.await.map_err(|join| DlqError::Archive {
            path: self.path.clone(),
            item: 0,
            problem: format!("the file writer failed: {join}"),
        })?
    }
}

fn partial_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}

fn write_jsonl(
    path: &Path,
    out: &mut impl Write,
    records: impl Iterator<Item = Selected>,
) -> Result<u64> {
    let mut count = 0;
    for selected in records {
        serde_json::to_writer(&mut *out, &to_json(&selected)).map_err(|source| DlqError::Json {
            context: format!("record {}", selected.record.place()),
            source,
        })?;
        out.write_all(b"\n").map_err(DlqError::io(path))?;
        count += 1;
    }
    Ok(count)
}

/// Reads an archive written by [`ArchiveWriter`], in either format (told apart by the
/// Avro magic bytes).
pub async fn read_archive(path: &Path) -> Result<Vec<Selected>> {
    let path = path.to_owned();
    let task_path = path.clone();
    tokio::task::spawn_blocking(move || {
        let path = task_path;
        let mut file = BufReader::new(File::open(&path).map_err(DlqError::io(&path))?);
        let magic = file.fill_buf().map_err(DlqError::io(&path))?;
        if magic.starts_with(b"Obj\x01") {
            return avro::read(&path, file);
        }
        read_jsonl(&path, file)
    })
    .await
    .map_err(|join| DlqError::Archive {
        path,
        item: 0,
        problem: format!("the file reader failed: {join}"),
    })?
}

fn read_jsonl(path: &Path, input: impl Read) -> Result<Vec<Selected>> {
    let mut out = Vec::new();
    for (index, line) in BufReader::new(input).lines().enumerate() {
        let line = line.map_err(DlqError::io(path))?;
        if line.trim().is_empty() {
            continue;
        }
        let problem = |problem: String| DlqError::Archive {
            path: path.to_owned(),
            item: index + 1,
            problem,
        };
        let value: serde_json::Value =
            serde_json::from_str(&line).map_err(|e| problem(format!("not JSON: {e}")))?;
        out.push(from_json(value).map_err(|e| problem(e.to_string()))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use hookline_core::envelope::ErrorReason;

    use super::*;
    use crate::actions::{Action, ActionKind, History};
    use crate::record::fixtures::record;

    fn records() -> Vec<Selected> {
        let mut binary = record(0, 1, "ep-b", ErrorReason::MalformedEvent, 2_000);
        binary.envelope.original_payload_bytes = vec![0, 0, 0, 0, 9, 0xff];
        binary.envelope.last_status_code = None;
        binary.timestamp_ms = None;
        let mut cut = record(1, 4, "ep-c", ErrorReason::RetriesExhausted, 3_000);
        cut.envelope.original_payload_bytes.truncate(5);
        cut.envelope.original_payload_truncated = true;
        cut.envelope.original_payload_size = Some(1_500_000);
        cut.envelope.tenant_id = Some("acme".into());
        vec![
            Selected {
                record: record(0, 0, "ep-a", ErrorReason::RetriesExhausted, 1_000),
                history: History(vec![
                    Action {
                        note: Some("looked".into()),
                        ..Action::new(ActionKind::Note, 5, "ops")
                    },
                    // From the console: the role is archived too.
                    Action {
                        note: Some("OPS-7".into()),
                        role: Some("operator".into()),
                        ..Action::new(ActionKind::Note, 6, "alice")
                    },
                ]),
            },
            Selected {
                record: binary,
                history: History::default(),
            },
            Selected {
                record: cut,
                history: History::default(),
            },
        ]
    }

    #[tokio::test]
    async fn both_formats_round_trip_and_never_overwrite() {
        let dir = tempfile::tempdir().expect("temp dir");
        for (name, format) in [("a.avro", Format::Avro), ("a.jsonl", Format::Jsonl)] {
            let path = dir.path().join(name);
            assert_eq!(Format::from_path(&path), format);
            let writer = ArchiveWriter::create(&path, format, "t.dlq").expect("create");
            for r in records() {
                writer.write(r).await.expect("write");
            }
            assert!(!path.exists(), "the file appears only when finished");
            assert_eq!(writer.finish().await.expect("finish"), 3);
            assert_eq!(read_archive(&path).await.expect("read"), records());
            assert!(matches!(
                ArchiveWriter::create(&path, format, "t.dlq"),
                Err(DlqError::FileExists { .. })
            ));
        }
        let partials = || {
            std::fs::read_dir(dir.path())
                .expect("list")
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().contains("partial"))
                .count()
        };
        let dropped = dir.path().join("dropped.avro");
        let writer = ArchiveWriter::create(&dropped, Format::Avro, "t.dlq").expect("create");
        assert_eq!(partials(), 1, "the partial file exists once created");
        writer.write(records().remove(0)).await.expect("write");
        drop(writer);
        // The writer thread removes its partial file once it sees the channel closed.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while partials() > 0 && std::time::Instant::now() < give_up {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(
            !dropped.exists(),
            "an unfinished archive is not left behind"
        );
        let leftovers = partials();
        assert_eq!(leftovers, 0);
    }

    #[tokio::test]
    async fn other_files_are_refused_with_the_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("bad.jsonl");
        std::fs::write(&path, "\n{\"partition\": 0}\n").expect("write");
        let error = read_archive(&path).await.expect_err("not an archive");
        assert!(
            matches!(error, DlqError::Archive { item: 2, .. }),
            "{error:?}"
        );
    }
}
