//! A Confluent-compatible schema registry: registration, compatibility, and Avro values
//! framed as magic byte 0 + 4-byte schema id (encoded through `schema_registry_converter`,
//! decoded here, with writer schemas fetched by id, checked and cached).

mod budget;
mod config;
mod decode;
mod nesting;
mod patience;

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use apache_avro::Schema;
use apache_avro::types::Value;
use schema_registry_converter::async_impl::avro::AvroEncoder;
use schema_registry_converter::async_impl::schema_registry::SrSettings;
use schema_registry_converter::error::SRCError;
use schema_registry_converter::schema_registry_common::{
    SchemaType, SubjectNameStrategy, SuppliedSchema,
};
use serde::Deserialize;

pub use self::budget::MAX_DECODED_BYTES;
use self::config::Auth;
pub use self::config::{RegistrySettings, RegistrySettingsError};
pub use self::nesting::{MAX_SCHEMA_DEPTH, SchemaRefusal};
pub use self::patience::{STARTUP_PATIENCE, with_patience};
use crate::{Error, Result};

/// Checks a writer schema that comes from elsewhere than the registry (an archive file's)
/// as the registry's are before anything is decoded with it: refused when it is recursive,
/// nests more than [`MAX_SCHEMA_DEPTH`] levels deep, refers to a type it does not define,
/// or has a fixed type larger than the decoder may allocate.
pub fn check_writer_schema(schema: &Schema) -> std::result::Result<(), SchemaRefusal> {
    nesting::check(schema).map(drop)
}

const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// A subject's compatibility level, as the Confluent API names them.
#[derive(Clone, Copy, Debug, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Compatibility {
    /// No check.
    None,
    /// New readers read data written with the previous schema.
    Backward,
    /// ... with every earlier schema.
    BackwardTransitive,
    /// Old readers read data written with the new schema.
    Forward,
    /// ... every earlier reader.
    ForwardTransitive,
    /// Both directions, previous schema.
    Full,
    /// Both directions, every earlier schema.
    FullTransitive,
}

impl fmt::Display for Compatibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compatibility::None => "NONE",
            Compatibility::Backward => "BACKWARD",
            Compatibility::BackwardTransitive => "BACKWARD_TRANSITIVE",
            Compatibility::Forward => "FORWARD",
            Compatibility::ForwardTransitive => "FORWARD_TRANSITIVE",
            Compatibility::Full => "FULL",
            Compatibility::FullTransitive => "FULL_TRANSITIVE",
        })
    }
}

/// A registry client: encodes and decodes framed Avro (caching schemas by id) and manages
/// subjects.
pub struct Registry {
    /// The base URL requests go to.
    base_url: String,
    /// The URL as errors and logs show it.
    url: String,
    auth: Auth,
    http: reqwest::Client,
    /// The converter's encoder, built on the first [`Registry::encode_value`]: it has an
    /// HTTP client of its own, and building one loads the system's CA bundle (a tenth of a
    /// dispatcher's start-up CPU), while a dispatcher never encodes through it.
    encoder: OnceLock<std::result::Result<AvroEncoder, SRCError>>,
    timeout: Duration,
    ca_certificates: Vec<reqwest::Certificate>,
    writer_schemas: decode::SchemaCache,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("url", &self.url)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

/// What a fetch of a writer schema tells the decodes that waited for it: that it failed.
#[derive(Debug)]
struct FetchFailed;

#[derive(Deserialize)]
struct IdAnswer {
    id: u32,
}

impl Registry {
    /// A client for the registry at `settings.url`, authenticating as the settings say and
    /// trusting their CA file. Refuses unusable settings ([`Error::RegistrySettings`]).
    pub fn new(settings: &RegistrySettings) -> Result<Self> {
        let valid = settings.validated()?;
        let timeout = Duration::from_millis(settings.timeout_ms);
        let http = client_builder(&valid.ca_certificates, timeout)
            .build()
            .map_err(|source| Error::RegistryHttp {
                url: valid.shown_url.clone(),
                context: "building the HTTP client".into(),
                source: source.without_url(),
            })?;
        Ok(Registry {
            base_url: valid.url,
            url: valid.shown_url,
            auth: valid.auth,
            encoder: OnceLock::new(),
            timeout,
            ca_certificates: valid.ca_certificates,
            writer_schemas: decode::schema_cache(),
            http,
        })
    }

    /// The converter's encoder, built once.
    fn encoder(&self) -> Result<&AvroEncoder> {
        let built = self.encoder.get_or_init(|| {
            let mut sr = SrSettings::new_builder(self.base_url.clone());
            sr.set_timeout(self.timeout).no_proxy();
            match &self.auth {
                Auth::None => {}
                Auth::Basic { username, password } => {
                    sr.set_basic_authorization(username, Some(password.expose()));
                }
                Auth::Bearer(token) => {
                    sr.set_token_authorization(token.expose());
                }
            }
            // The converter builds its client from ours, so that it trusts the same CA.
            let client = client_builder(&self.ca_certificates, self.timeout);
            sr.build_with(client).map(AvroEncoder::new)
        });
        built.as_ref().map_err(|source| Error::Avro {
            context: "building registry settings".into(),
            source: source.clone(),
        })
    }

    /// The registry's base URL, as logs may show it (without user info or query).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A request to `<base URL><path>`, with the credentials (reqwest marks the
    /// `Authorization` header sensitive).
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self
            .http
            .request(method, format!("{}{path}", self.base_url));
        match &self.auth {
            Auth::None => request,
            Auth::Basic { username, password } => {
                request.basic_auth(username, Some(password.expose()))
            }
            Auth::Bearer(token) => request.bearer_auth(token.expose()),
        }
    }

    /// Answers when the registry serves its subject list.
    pub async fn ping(&self) -> Result<()> {
        let context = "listing subjects";
        let response = self
            .request(reqwest::Method::GET, "/subjects")
            .send()
            .await
            .map_err(|source| self.http_error(context, source))?;
        self.check(context, response).await.map(drop)
    }

    /// A subject's own compatibility level, `None` when it has none (the global one applies).
    pub async fn compatibility(&self, subject: &str) -> Result<Option<Compatibility>> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Level {
            compatibility_level: Compatibility,
        }
        let context = format!("reading the compatibility of {subject}");
        let response = self
            .request(reqwest::Method::GET, &format!("/config/{subject}"))
            .send()
            .await
            .map_err(|source| self.http_error(&context, source))?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let body = self.check(&context, response).await?;
        let level: Level = serde_json::from_str(&body).map_err(|e| Error::RegistryRefused {
            context: format!("{context}: unreadable answer ({e})"),
            status: 200,
            body,
        })?;
        Ok(Some(level.compatibility_level))
    }

    /// Makes sure a subject has `level`: sets it unless it is set already. Safe when several
    /// replicas start at once (a registry may refuse the second of two concurrent creations).
    pub async fn ensure_compatibility(&self, subject: &str, level: Compatibility) -> Result<()> {
        if self.compatibility(subject).await? == Some(level) {
            return Ok(());
        }
        match self.set_compatibility(subject, level).await {
            Err(Error::RegistryRefused { status: 409, .. })
                if self.compatibility(subject).await? == Some(level) =>
            {
                Ok(())
            }
            other => other,
        }
    }

    /// Sets a subject's compatibility level (`PUT /config/<subject>`).
    pub async fn set_compatibility(&self, subject: &str, level: Compatibility) -> Result<()> {
        let context = format!("setting compatibility of {subject} to {level}");
        let response = self
            .request(reqwest::Method::PUT, &format!("/config/{subject}"))
            .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
            .body(serde_json::json!({ "compatibility": level.to_string() }).to_string())
            .send()
            .await
            .map_err(|source| self.http_error(&context, source))?;
        self.check(&context, response).await.map(drop)
    }

    /// Registers an Avro schema under a subject and returns its id; the same schema again
    /// returns the same id; an incompatible one is refused ([`Error::RegistryRefused`]).
    pub async fn register(&self, subject: &str, schema_json: &str) -> Result<u32> {
        let context = format!("registering a schema under {subject}");
        let response = self
            .request(
                reqwest::Method::POST,
                &format!("/subjects/{subject}/versions"),
            )
            .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
            .body(serde_json::json!({ "schema": schema_json, "schemaType": "AVRO" }).to_string())
            .send()
            .await
            .map_err(|source| self.http_error(&context, source))?;
        let body = self.check(&context, response).await?;
        let answer: IdAnswer = serde_json::from_str(&body).map_err(|e| Error::RegistryRefused {
            context: format!("{context}: unreadable answer ({e})"),
            status: 200,
            body,
        })?;
        Ok(answer.id)
    }

    /// Encodes `value` with `schema_json` as the value of `topic` (subject `<topic>-value`,
    /// registered on first use), framed for Confluent-compatible readers.
    pub async fn encode_value(
        &self,
        topic: &str,
        schema_json: &str,
        value: Value,
    ) -> Result<Vec<u8>> {
        let strategy = SubjectNameStrategy::TopicNameStrategyWithSchema(
            topic.to_owned(),
            false,
            SuppliedSchema::new(None, SchemaType::Avro, schema_json.to_owned()),
        );
        let encoder = self.encoder()?;
        encoder
            .encode_value(value, &strategy)
            .await
            .map_err(|source| {
                // The converter caches failures; drop them so that a registry that comes back
                // is asked again on the next try.
                encoder.remove_errors_from_cache();
                Error::Avro {
                    context: format!("encoding a value of {topic}"),
                    source,
                }
            })
    }

    /// Decodes a framed Avro value with the writer schema its id names. Fails with a
    /// transient error ([`Error::is_transient`]) when the registry cannot be reached, times
    /// out, fails (5xx, 408, 429) or refuses hookline's credentials (401, 403); with a
    /// permanent one when the bytes are not framed, the id is unknown (404), the schema is
    /// not Avro or is refused ([`Error::UnsupportedSchema`]: recursive, too deep, arrays of
    /// zero-size items), the value would take more than [`MAX_DECODED_BYTES`] decoded
    /// ([`Error::OverBudget`]), or the bytes do not decode with it.
    pub async fn decode(&self, bytes: &[u8]) -> Result<Value> {
        let (id, datum) = decode::parse_frame(bytes)?;
        let writer = self.writer_schema(id).await?;
        decode::read_datum(id, &writer, datum)
    }

    /// The writer schema with this id, from the cache or the registry: decodes that miss at
    /// once (a cold start with many records in flight) wait for one fetch. When that fetch
    /// fails, its caller gets its error, and each waiter fetches once more itself to get its
    /// own (an error is not shared: it keeps its cause, which cannot be copied).
    async fn writer_schema(&self, id: u32) -> Result<Arc<Schema>> {
        let mut failure = None;
        let shared = self
            .writer_schemas
            .try_get_with(id, async {
                self.fetch_writer_schema(id).await.map_err(|error| {
                    failure = Some(error);
                    FetchFailed
                })
            })
            .await;
        match (shared, failure) {
            (Ok(schema), _) => Ok(schema),
            (Err(_), Some(error)) => Err(error),
            (Err(_), None) => self.fetch_writer_schema(id).await,
        }
    }

    /// Fetches and checks the writer schema with this id.
    async fn fetch_writer_schema(&self, id: u32) -> Result<Arc<Schema>> {
        let context = format!("fetching writer schema {id}");
        // `deleted=true`: records written before their schema's subject was soft-deleted
        // still decode.
        let response = self
            .request(
                reqwest::Method::GET,
                &format!("/schemas/ids/{id}?deleted=true"),
            )
            .send()
            .await
            .map_err(|source| self.http_error(&context, source))?;
        let body = self.check(&context, response).await?;
        Ok(Arc::new(decode::writer_schema(id, &context, body)?))
    }

    fn http_error(&self, context: &str, source: reqwest::Error) -> Error {
        // reqwest's message holds the request's URL: the base URL is shown redacted instead.
        Error::RegistryHttp {
            url: self.url.clone(),
            context: context.to_owned(),
            source: source.without_url(),
        }
    }

    async fn check(&self, context: &str, response: reqwest::Response) -> Result<String> {
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|source| self.http_error(context, source))?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(Error::RegistryRefused {
                context: context.to_owned(),
                status: status.as_u16(),
                body,
            })
        }
    }
}

/// The registry's HTTP client: trusting the settings' CA files as well as the system's
/// (the process's shared connector when there are none), no proxy, `timeout` per request.
fn client_builder(
    ca_certificates: &[reqwest::Certificate],
    timeout: Duration,
) -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder().no_proxy().timeout(timeout);
    if ca_certificates.is_empty() {
        crate::with_system_tls(builder)
    } else {
        builder.tls_certs_merge(ca_certificates.iter().cloned())
    }
}
