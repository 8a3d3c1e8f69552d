//! `hookline dlq archive` (to a file, or `--to` object storage) and the reading of archives
//! for `hookline dlq inspect --file`; the `[archive]` config section.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::ValueEnum;
use figment::Figment;
use figment::providers::{Env, Format as _, Toml};
use hookline_dlq::archive::store::{
    ArchiveConfig, ArchiveRecords, ArchiveReport, ArchiveStore, ArchiveUrl, StoreSettings,
    archive_selection,
};
use hookline_dlq::archive::{ArchiveWriter, Format};
use hookline_dlq::{RecordRef, SelectedItem};

use super::{Printer, SelectArgs, open, warn_undecodable};
use crate::commands::Context;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ArchiveFormat {
    /// Avro object container file with the writer schema embedded.
    Avro,
    /// One JSON object per line.
    Jsonl,
}

/// Arguments of `hookline dlq archive`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("destination").required(true).args(["file", "to"])))]
pub(super) struct ArchiveArgs {
    #[command(flatten)]
    select: SelectArgs,
    /// The file to write; it must not exist.
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,
    /// Object storage instead of a file: s3://bucket/prefix/, gs://bucket/prefix/,
    /// az://container/prefix/ (or azure://), file:///dir/ or a local directory. Objects
    /// land under <prefix>/<dlq topic>/<yyyy>/<mm>/<dd>/ (the UTC day each record was
    /// parked) as Avro container files named <run start>-<run id>.avro: each run writes
    /// objects of its own, so running again with the same selection adds objects and never
    /// replaces or changes earlier ones. An object appears only once complete.
    #[arg(long, value_name = "URL", conflicts_with = "format")]
    to: Option<String>,
    /// File format (default: jsonl for .jsonl/.json names, else avro). Objects are Avro.
    #[arg(long, value_enum)]
    format: Option<ArchiveFormat>,
    /// Include redriven and resolved records.
    #[arg(long)]
    all: bool,
    /// A TOML config file whose `[archive]` section says how to reach the object store;
    /// `HOOKLINE_ARCHIVE__<KEY>` variables override it (e.g. HOOKLINE_ARCHIVE__REGION).
    #[arg(long, env = "HOOKLINE_CONFIG", value_name = "PATH")]
    config: Option<PathBuf>,
}

/// Runs `hookline dlq archive`.
pub(super) async fn archive(args: ArchiveArgs, context: &Context) -> anyhow::Result<()> {
    let filter = args.select.filter()?;
    if let Some(to) = &args.to {
        // The URL and settings are checked before anything is read.
        let url = ArchiveUrl::parse(to)?;
        let settings = load_settings(args.config.as_deref())?;
        let store = ArchiveStore::open(&url, &settings, true)?;
        let mut selection = open(context, filter, false, args.all).await?;
        let report = archive_selection(&mut selection, &store).await?;
        return print_report(&report, &url);
    }
    let Some(file) = &args.file else {
        anyhow::bail!("give --file PATH or --to URL");
    };
    let format = match args.format {
        Some(ArchiveFormat::Avro) => Format::Avro,
        Some(ArchiveFormat::Jsonl) => Format::Jsonl,
        None => Format::from_path(file),
    };
    let mut selection = open(context, filter, false, args.all).await?;
    let writer = ArchiveWriter::create(file, format, &context.topics.dlq())?;
    let mut undecodable = Vec::new();
    while let Some(item) = selection.next().await? {
        match item {
            SelectedItem::Record(s) => writer.write(*s).await?,
            SelectedItem::Undecodable(u) => undecodable.push(RecordRef {
                partition: u.partition,
                offset: u.offset,
            }),
        }
    }
    let count = writer.finish().await?;
    println!("archived {count} records to {}", file.display());
    let hidden = selection.stats().hidden_handled;
    if hidden > 0 {
        eprintln!("{hidden} redriven or resolved records not archived (--all archives them)");
    }
    undecodable.extend_from_slice(selection.skipped_undecodable());
    warn_undecodable(&undecodable);
    Ok(())
}

fn print_report(report: &ArchiveReport, url: &ArchiveUrl) -> anyhow::Result<()> {
    let mut out = Printer(std::io::stdout().lock());
    for object in &report.objects {
        let line = format!(
            "wrote {}: {} records, {} bytes",
            object.url, object.records, object.bytes
        );
        if !out.line(&line)? {
            return Ok(());
        }
    }
    out.line(&format!(
        "archived {} records in {} objects ({} bytes) to {}",
        report.records,
        report.objects.len(),
        report.bytes,
        url.as_str()
    ))?;
    if report.hidden_handled > 0 {
        eprintln!(
            "{} redriven or resolved records not archived (--all archives them)",
            report.hidden_handled
        );
    }
    warn_undecodable(&report.undecodable);
    Ok(())
}

/// Opens an archive for `inspect --file`: a local file or directory, or an object-store
/// URL (one object, or every `.avro` object under a prefix).
pub(super) async fn open_archive(
    source: &str,
    config: Option<&Path>,
) -> anyhow::Result<ArchiveRecords> {
    let url = ArchiveUrl::parse(source)?;
    let settings = load_settings(config)?;
    Ok(ArchiveRecords::open(&url, &settings).await?)
}

/// The `[archive]` section: the file's, then `HOOKLINE_ARCHIVE__*` variables; unknown keys
/// and wrong types are refused with the key named, and the values are checked. Also read
/// by `hookline console` for its `archive_to`.
pub(crate) fn load_settings(file: Option<&Path>) -> anyhow::Result<StoreSettings> {
    let mut figment = Figment::new();
    if let Some(file) = file {
        if !file.exists() {
            anyhow::bail!("config file {} does not exist", file.display());
        }
        figment = Figment::from(Toml::file(file)).focus("archive");
    }
    figment = figment.merge(Env::prefixed("HOOKLINE_ARCHIVE__").split("__"));
    let config: ArchiveConfig = figment
        .extract()
        .map_err(|error| anyhow::anyhow!(archive_error(&error)))
        .context("loading the archive configuration")?;
    Ok(config.into_settings()?)
}

/// A figment error with its key as `archive.<key>`, never a value.
fn archive_error(error: &figment::Error) -> String {
    let key = error.path.join(".");
    let kind = &error.kind;
    if key.is_empty() {
        format!("[archive]: {kind}")
    } else {
        format!("archive.{key}: {kind}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("hookline.toml");
        std::fs::write(&path, text).expect("write");
        (dir, path)
    }

    #[test]
    fn the_archive_section_is_read_and_its_errors_name_the_key() {
        let (_dir, path) = write(
            "[outbox]\nbatch_size = 7\n\n[archive]\nendpoint_url = \"http://127.0.0.1:9000\"\nallow_http = true\naccess_key_id = \"AKID\"\nsecret_access_key = \"s3cr3t-value\"\n",
        );
        let settings = load_settings(Some(&path)).expect("loads");
        assert!(settings.allow_http);
        assert_eq!(
            settings
                .credentials
                .map(|c| c.secret_access_key.expose().to_owned()),
            Some("s3cr3t-value".to_owned())
        );

        let (_dir, path) = write("[archive]\nallow_htp = true\n");
        let error = format!("{:#}", load_settings(Some(&path)).expect_err("unknown key"));
        assert!(error.contains("archive.allow_htp"), "{error}");

        let (_dir, path) = write("[archive]\nallow_http = \"yes please\"\n");
        let error = format!("{:#}", load_settings(Some(&path)).expect_err("wrong type"));
        assert!(error.contains("archive.allow_http"), "{error}");

        let (_dir, path) = write("[archive]\naccess_key_id = \"AKID\"\n");
        let error = format!("{:#}", load_settings(Some(&path)).expect_err("half"));
        assert!(error.contains("archive.secret_access_key"), "{error}");

        let missing = load_settings(Some(Path::new("/nonexistent/hookline.toml")));
        assert!(format!("{:#}", missing.expect_err("no file")).contains("does not exist"));
    }
}
