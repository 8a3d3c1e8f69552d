//! The state every handler shares: what the console reads and writes (Kafka, the registry,
//! the topics, the archive store), its settings, the session key and cookie names, the
//! login gate and the revoked sessions.

use std::sync::Arc;

use axum::extract::FromRef;
use axum_extra::extract::cookie::{Cookie, Key, SameSite};
use hookline_dlq::archive::store::{ArchiveStore, StoreSettings};
use hookline_kafka::{KafkaSettings, Registry};
use hookline_producer::{EndpointStore, Topics};

use crate::auth::{CookieNames, LoginGate, Revoked};
use crate::config::ConsoleSettings;
use crate::error::{ConsoleError, Result};

/// What the console reads and writes: Kafka, the registry, the topic names, the object
/// store archives go to.
#[derive(Clone)]
pub struct ConsoleContext {
    /// How to reach Kafka.
    pub kafka: KafkaSettings,
    /// The schema registry client.
    pub registry: Arc<Registry>,
    /// The topic names (the DLQ, its actions, the attempt log, the endpoint table).
    pub topics: Topics,
    /// How to reach the store of `console.archive_to` (the `[archive]` section, as for
    /// `hookline dlq archive`); the default when archiving is off.
    pub archive: StoreSettings,
}

/// The state every handler shares.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub(crate) struct Inner {
    pub settings: ConsoleSettings,
    pub key: Key,
    pub context: ConsoleContext,
    pub endpoints: EndpointStore,
    pub insight: crate::insight::Insight,
    pub archive: Option<ArchiveStore>,
    pub login_gate: LoginGate,
    pub revoked: Revoked,
    pub cookie_names: CookieNames,
}

impl AppState {
    /// The state of a console with `settings` over `context`.
    pub fn new(settings: ConsoleSettings, context: ConsoleContext) -> Result<AppState> {
        // The key's length (at least 32 bytes) is checked by the settings' validation.
        let key = Key::derive_from(settings.session_key.expose().as_bytes());
        let endpoints = EndpointStore::new(&context.kafka, &context.topics.endpoints)?;
        let insight_settings = settings
            .insight
            .to_settings(&context.topics.events)
            .map_err(Box::new)?;
        let insight = crate::insight::Insight::new(
            &context.kafka,
            Arc::clone(&context.registry),
            &context.topics.endpoints,
            insight_settings,
        )
        .map_err(Box::new)?;
        // Made once, at start-up, so that a bad destination stops the console there (a local
        // directory is made now); nothing is sent to a store until an archive runs.
        let archive = settings
            .archive_to
            .as_ref()
            .map(|url| ArchiveStore::open(url, &context.archive, true))
            .transpose()
            .map_err(ConsoleError::Archive)?;
        let login_gate = LoginGate::new(&settings.users, &settings.login);
        let cookie_names = CookieNames::new(settings.secure_cookies);
        Ok(AppState(Arc::new(Inner {
            settings,
            key,
            context,
            endpoints,
            insight,
            archive,
            login_gate,
            revoked: Revoked::default(),
            cookie_names,
        })))
    }

    /// Where the DLQ is archived to, when archiving is on.
    pub(crate) fn archive(&self) -> Option<&ArchiveStore> {
        self.0.archive.as_ref()
    }

    pub(crate) fn insight(&self) -> &crate::insight::Insight {
        &self.0.insight
    }

    pub(crate) fn endpoints(&self) -> &EndpointStore {
        &self.0.endpoints
    }

    pub(crate) fn settings(&self) -> &ConsoleSettings {
        &self.0.settings
    }

    pub(crate) fn context(&self) -> &ConsoleContext {
        &self.0.context
    }

    pub(crate) fn login_gate(&self) -> &LoginGate {
        &self.0.login_gate
    }

    pub(crate) fn revoked(&self) -> &Revoked {
        &self.0.revoked
    }

    /// The cookies' names (`__Host-` ones with `Secure` cookies).
    pub(crate) fn cookie_names(&self) -> CookieNames {
        self.0.cookie_names
    }

    /// A cookie as the console sets them: `HttpOnly`, `SameSite=Strict`, `Path=/`, no
    /// `Domain`, and `Secure` unless the console is on loopback over plain HTTP.
    pub(crate) fn cookie(&self, name: &'static str, value: String) -> Cookie<'static> {
        Cookie::build((name, value))
            .http_only(true)
            .same_site(SameSite::Strict)
            .path("/")
            .secure(self.0.settings.secure_cookies)
            .build()
    }

    /// The removal of the cookie `name`, with the attributes it was set with (a browser
    /// ignores a `__Host-` cookie without `Secure`, its removal included).
    pub(crate) fn removal(&self, name: &'static str) -> Cookie<'static> {
        let mut cookie = self.cookie(name, String::new());
        cookie.make_removal();
        cookie
    }
}

impl FromRef<AppState> for Key {
    fn from_ref(state: &AppState) -> Key {
        state.0.key.clone()
    }
}
