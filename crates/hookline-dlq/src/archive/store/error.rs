//! What goes wrong archiving to (or reading from) an object store.

/// An error of the object-store archive: a URL or setting refused before anything is
/// written, or a store call that failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The archive URL is not one hookline can write to or read from.
    #[error("archive URL `{url}`: {problem}")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A setting of the `[archive]` section is not valid; names the field, never a value.
    #[error("archive.{field}: {problem}")]
    Config {
        /// The field, e.g. `endpoint_url`.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The store client could not be made from the URL and settings.
    #[error("archive {url}: {context}")]
    Open {
        /// Where (the URL, without credentials).
        url: String,
        /// What was being done.
        context: String,
        /// The client's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// A call to the store failed (after its own retries).
    #[error("archive {url}: {context}")]
    Call {
        /// Which object or prefix (the URL, without credentials).
        url: String,
        /// What was being done.
        context: String,
        /// The client's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// Nothing to read at the URL.
    #[error("archive {url}: no .avro objects there")]
    Empty {
        /// The URL given.
        url: String,
    },
}
