//! Archive URLs (`s3://bucket/prefix/`, `gs://`, `az://` / `azure://`, `file:///dir/` or a
//! plain directory) and the object-store clients made from them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::RetryConfig;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use url::Url;

use super::config::StoreSettings;
use super::error::StoreError;

/// The most a store call is retried for (object_store's default is 3 minutes).
const RETRY_TIMEOUT: Duration = Duration::from_secs(60);

/// The schemes accepted, for messages.
const SCHEMES: &str = "s3://, gs://, az://, azure://, file:// or a local directory";

/// Which kind of store a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// Amazon S3 or an S3-compatible server (`s3://`, `s3a://`).
    S3,
    /// Google Cloud Storage (`gs://`).
    Gcs,
    /// Azure Blob Storage (`az://`, `azure://`, `abfs://`, `abfss://`, `adl://`).
    Azure,
    /// The local file system (`file://` or a path).
    Local,
}

/// A parsed archive URL: the store, the bucket, and the key prefix (or one object's key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveUrl {
    /// The kind of store.
    pub kind: StoreKind,
    /// `scheme://bucket` as given, empty for a local directory.
    pub base: String,
    /// The local directory (or file), for [`StoreKind::Local`].
    pub local: Option<PathBuf>,
    /// The key prefix or key, without a leading or trailing `/`.
    pub prefix: String,
    /// Whether the URL ends with `/`: it names a prefix, never one object.
    pub is_folder: bool,
    text: String,
}

impl ArchiveUrl {
    /// Parses an archive URL or local path.
    pub fn parse(text: &str) -> Result<ArchiveUrl, StoreError> {
        let trimmed = text.trim();
        let refuse = |problem: String| StoreError::Url {
            url: trimmed.to_owned(),
            problem,
        };
        if trimmed.is_empty() {
            return Err(refuse("empty".into()));
        }
        let is_folder = trimmed.ends_with('/');
        if !trimmed.contains("://") {
            return Ok(ArchiveUrl {
                kind: StoreKind::Local,
                base: String::new(),
                local: Some(PathBuf::from(trimmed)),
                prefix: String::new(),
                is_folder,
                text: trimmed.to_owned(),
            });
        }
        let url = Url::parse(trimmed).map_err(|e| refuse(format!("not a URL ({e})")))?;
        if url.password().is_some() || url.query().is_some() || url.fragment().is_some() {
            // Shown without what may be a secret (a password, a signed query).
            let mut shown = url.clone();
            let _ = shown.set_password(None);
            shown.set_query(None);
            shown.set_fragment(None);
            return Err(StoreError::Url {
                url: shown.to_string(),
                problem: "must not hold a password, query or fragment: credentials go in [archive] or the environment".into(),
            });
        }
        let kind = match url.scheme() {
            "s3" | "s3a" => StoreKind::S3,
            "gs" => StoreKind::Gcs,
            "az" | "azure" | "abfs" | "abfss" | "adl" => StoreKind::Azure,
            "file" => StoreKind::Local,
            other => {
                return Err(refuse(format!(
                    "`{other}://` is not supported: use {SCHEMES}"
                )));
            }
        };
        if kind == StoreKind::Local {
            let path = url
                .to_file_path()
                .map_err(|()| refuse("a file:// URL must be an absolute local path".into()))?;
            return Ok(ArchiveUrl {
                kind,
                base: String::new(),
                local: Some(path),
                prefix: String::new(),
                is_folder,
                text: trimmed.to_owned(),
            });
        }
        let bucket = match url.host_str() {
            Some(h) if !h.is_empty() => h,
            _ => return Err(refuse("names no bucket (scheme://bucket/prefix/)".into())),
        };
        let user = match url.username() {
            "" => String::new(),
            u => format!("{u}@"),
        };
        let prefix = Path::from_url_path(url.path())
            .map_err(|e| refuse(format!("not a valid key prefix ({e})")))?;
        Ok(ArchiveUrl {
            kind,
            base: format!("{}://{user}{bucket}", url.scheme()),
            local: None,
            prefix: prefix.as_ref().to_owned(),
            is_folder,
            text: trimmed.to_owned(),
        })
    }

    /// The URL as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Where an object of this store is, for people: `s3://bucket/key`, or a local path.
    pub fn display(&self, key: &Path) -> String {
        match &self.local {
            Some(dir) => dir.join(key.as_ref()).display().to_string(),
            None => format!("{}/{}", self.base, key.as_ref()),
        }
    }
}

/// An object store and the prefix (or key) in it that an [`ArchiveUrl`] names.
#[derive(Clone, Debug)]
pub struct ArchiveStore {
    /// The client.
    pub store: Arc<dyn ObjectStore>,
    /// The prefix (or key) inside it.
    pub prefix: Path,
    /// The URL it was made from.
    pub url: ArchiveUrl,
}

impl ArchiveStore {
    /// Makes the client for `url` with `settings` (S3 settings apply to S3 URLs only);
    /// credentials not in `settings` come from the environment, as each store's own tools
    /// read them. Nothing is sent yet. A local directory is made when `create`.
    pub fn open(
        url: &ArchiveUrl,
        settings: &StoreSettings,
        create: bool,
    ) -> Result<ArchiveStore, StoreError> {
        let open_error = |context: &str| {
            let url = url.as_str().to_owned();
            let context = context.to_owned();
            move |source| StoreError::Open {
                url,
                context,
                source: Box::new(source),
            }
        };
        let retry = RetryConfig {
            retry_timeout: RETRY_TIMEOUT,
            ..RetryConfig::default()
        };
        let store: Arc<dyn ObjectStore> = match url.kind {
            StoreKind::Local => {
                let dir = url.local.clone().unwrap_or_default();
                if create {
                    std::fs::create_dir_all(&dir).map_err(|e| StoreError::Url {
                        url: url.as_str().to_owned(),
                        problem: format!("cannot make the directory: {e}"),
                    })?;
                }
                let fs = LocalFileSystem::new_with_prefix(&dir)
                    .map_err(open_error("opening the directory"))?;
                Arc::new(fs)
            }
            StoreKind::S3 => {
                let mut builder = AmazonS3Builder::from_env()
                    .with_url(url.as_str())
                    .with_retry(retry);
                if let Some(endpoint) = &settings.endpoint {
                    builder = builder.with_endpoint(endpoint.as_str().trim_end_matches('/'));
                }
                if let Some(region) = &settings.region {
                    builder = builder.with_region(region);
                }
                if settings.allow_http {
                    builder = builder.with_allow_http(true);
                }
                if let Some(c) = &settings.credentials {
                    builder = builder
                        .with_access_key_id(c.access_key_id.expose())
                        .with_secret_access_key(c.secret_access_key.expose());
                    if let Some(token) = &c.session_token {
                        builder = builder.with_token(token.expose());
                    }
                }
                Arc::new(builder.build().map_err(open_error("configuring S3"))?)
            }
            StoreKind::Gcs => {
                let builder = GoogleCloudStorageBuilder::from_env()
                    .with_url(url.as_str())
                    .with_retry(retry);
                Arc::new(builder.build().map_err(open_error("configuring GCS"))?)
            }
            StoreKind::Azure => {
                let builder = MicrosoftAzureBuilder::from_env()
                    .with_url(url.as_str())
                    .with_retry(retry);
                Arc::new(builder.build().map_err(open_error("configuring Azure"))?)
            }
        };
        Ok(ArchiveStore {
            store,
            prefix: Path::from(url.prefix.as_str()),
            url: url.clone(),
        })
    }

    /// Where `key` is, for people.
    pub fn display(&self, key: &Path) -> String {
        self.url.display(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ArchiveUrl {
        ArchiveUrl::parse(text).expect("an archive URL")
    }

    #[test]
    fn bucket_urls() {
        let s3 = parse("s3://dlq-archive/prod/hookline/");
        assert_eq!(s3.kind, StoreKind::S3);
        assert_eq!(s3.base, "s3://dlq-archive");
        assert_eq!(s3.prefix, "prod/hookline");
        assert!(s3.is_folder);
        assert_eq!(
            s3.display(&Path::from("prod/hookline/t.dlq/2026/01/09/x.avro")),
            "s3://dlq-archive/prod/hookline/t.dlq/2026/01/09/x.avro"
        );
        let object = parse("s3://b/p/t.dlq/2026/01/09/x.avro");
        assert_eq!(object.prefix, "p/t.dlq/2026/01/09/x.avro");
        assert!(!object.is_folder);
        assert_eq!(parse("s3://b").prefix, "");
        assert_eq!(parse("s3://b/").prefix, "");
        assert_eq!(parse("gs://b/p/").kind, StoreKind::Gcs);
        assert_eq!(parse("az://container/p/").kind, StoreKind::Azure);
        assert_eq!(parse("azure://container/p/").kind, StoreKind::Azure);
        let account = parse("abfss://fs@account.dfs.core.windows.net/p/");
        assert_eq!(account.base, "abfss://fs@account.dfs.core.windows.net");
        assert_eq!(account.prefix, "p");
        assert_eq!(parse("s3://b/a%20b/").prefix, "a b");
    }

    #[test]
    fn local_urls_and_paths() {
        let file = parse("file:///var/lib/hookline/archive/");
        assert_eq!(file.kind, StoreKind::Local);
        assert_eq!(
            file.local,
            Some(PathBuf::from("/var/lib/hookline/archive/"))
        );
        let plain = parse("./archive");
        assert_eq!(plain.kind, StoreKind::Local);
        assert_eq!(plain.local, Some(PathBuf::from("./archive")));
        assert_eq!(
            plain.display(&Path::from("t.dlq/2026/01/09/x.avro")),
            "./archive/t.dlq/2026/01/09/x.avro"
        );
    }

    #[test]
    fn other_urls_are_refused_with_what_is_accepted() {
        for (text, expected) in [
            ("http://h/p/", "`http://` is not supported: use s3://"),
            ("ftp://h/p/", "`ftp://` is not supported"),
            ("s3:///p/", "names no bucket"),
            ("s3://key:secret@b/p/", "must not hold a password"),
            ("s3://b/p/?x=1", "must not hold a password, query"),
            ("", "empty"),
            ("file://host/p/", "absolute local path"),
        ] {
            let error = ArchiveUrl::parse(text).expect_err(text).to_string();
            assert!(error.contains(expected), "{text}: {error}");
            assert!(!error.contains("secret"), "{error}");
        }
    }

    #[test]
    fn clients_are_made_without_sending_anything() {
        let settings = StoreSettings::default();
        for text in ["s3://b/p/", "gs://b/p/"] {
            let store = ArchiveStore::open(&parse(text), &settings, false).expect(text);
            assert_eq!(store.prefix.as_ref(), "p");
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let new_dir = dir.path().join("a/b");
        let url = parse(&new_dir.display().to_string());
        assert!(
            ArchiveStore::open(&url, &settings, false).is_err(),
            "not made"
        );
        ArchiveStore::open(&url, &settings, true).expect("made");
        assert!(new_dir.is_dir());
    }
}
