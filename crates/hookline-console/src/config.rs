//! The `[console]` section of hookline's config file (the user's contract: every field
//! documented, unknown keys refused), loaded in layers (defaults, the file,
//! `HOOKLINE_CONSOLE__*` variables) and converted once into validated [`ConsoleSettings`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use hookline_core::secret::Secret;
use hookline_dlq::archive::store::ArchiveUrl;
use serde::{Deserialize, Serialize};

use crate::auth::Role;
use crate::auth::token::TokenHash;
use crate::error::{ConsoleError, Result};

/// Where the console listens unless told otherwise: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8088";
/// The shortest `session_key`, in bytes.
pub const MIN_SESSION_KEY_BYTES: usize = 32;
/// The most records a page of the DLQ list may show.
pub const MAX_PAGE_SIZE: usize = 500;

/// The `[console]` section. Every field has a default except `session_key`, and at least
/// one user or the trusted header is needed to let anyone in.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleConfig {
    /// `host:port` to serve on (`--listen` wins); default `127.0.0.1:8088`.
    pub listen: String,
    /// The key that signs session cookies, at least 32 bytes; `${env:NAME}` or
    /// `${file:PATH}` keep it out of the file. Changing it logs everyone out.
    #[serde(serialize_with = "redacted")]
    pub session_key: Option<Secret>,
    /// How long a session lasts after login, in milliseconds (default 8 hours).
    pub session_lifetime_ms: u64,
    /// Mark cookies `Secure` (sent over HTTPS only) and name them with the `__Host-` prefix
    /// (`__Host-hookline_console`: only this origin over HTTPS may set them). Unset: on,
    /// unless `listen` is a loopback address (a console on loopback is reached over plain
    /// HTTP, where a browser would drop `Secure` cookies; set it to true when a local proxy
    /// serves it over HTTPS). `false` is refused unless `listen` is loopback.
    pub secure_cookies: Option<bool>,
    /// Hide the original payload (and the decoded event) from viewers: it may hold personal
    /// data. Default true.
    pub hide_payloads_from_viewer: bool,
    /// Records per page of the DLQ list (1 to 500, default 50).
    pub page_size: usize,
    /// How token logins are limited (`[console.login]`): checks at once, failed logins
    /// from one address and how long it is then refused.
    pub login: crate::auth::config::LoginConfig,
    /// Records listed on an action's confirmation page (the rest are counted).
    pub confirm_preview: usize,
    /// The users who log in with a token.
    pub users: Vec<UserConfig>,
    /// Trust this request header (e.g. `X-Forwarded-User`) as the user's name, set by an
    /// authenticating reverse proxy. Off unless set; only safe when nothing but the proxy
    /// can reach the console.
    pub trusted_header: Option<String>,
    /// With `trusted_header`: the header holding the user's role (`viewer`, `operator`,
    /// `admin`), used for users not in `trusted_roles`.
    pub trusted_role_header: Option<String>,
    /// With `trusted_header`: each proxy user's role by name; it wins over
    /// `trusted_role_header`. A user in neither is refused.
    pub trusted_roles: BTreeMap<String, Role>,
    /// What the overview and endpoints pages read (`[console.insight]`): windows, the
    /// dispatchers' group and `/metrics` URLs.
    pub insight: crate::insight::InsightConfig,
    /// Where operators archive DLQ records from the DLQ list, as `hookline dlq archive --to`
    /// takes it: `s3://bucket/prefix/`, `gs://`, `az://` (or `azure://`), or `file:///dir/`.
    /// Objects land under `<prefix>/<dlq topic>/<yyyy>/<mm>/<dd>/`. How to reach the store
    /// (an S3-compatible endpoint, a region, credentials) comes from the `[archive]` section
    /// of the same file, as for the CLI, else the store's usual environment variables. Unset
    /// (the default): no archive button, and archiving is refused.
    pub archive_to: Option<String>,
}

fn redacted<S: serde::Serializer>(
    secret: &Option<Secret>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    // Only the defaults are ever serialized (figment's first layer); a key never is.
    match secret {
        Some(_) => serializer.serialize_str("<redacted>"),
        None => serializer.serialize_none(),
    }
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            listen: DEFAULT_LISTEN.to_owned(),
            session_key: None,
            session_lifetime_ms: 8 * 3_600_000,
            secure_cookies: None,
            hide_payloads_from_viewer: true,
            page_size: 50,
            login: crate::auth::config::LoginConfig::default(),
            confirm_preview: 20,
            users: Vec::new(),
            trusted_header: None,
            trusted_role_header: None,
            trusted_roles: BTreeMap::new(),
            insight: crate::insight::InsightConfig::default(),
            archive_to: None,
        }
    }
}

/// One user who logs in with a token.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// The name recorded in the audit trail.
    pub name: String,
    /// What they may do: `viewer` (read), `operator` (also redrive, resolve, annotate and
    /// archive) or `admin` (also enable and disable endpoints).
    pub role: Role,
    /// The argon2 hash of their token, a PHC string (`$argon2id$v=19$...`), as printed by
    /// `hookline console hash-token`. The token itself is never stored.
    pub token_hash: String,
}

/// A user who logs in with a token, validated.
#[derive(Clone, Debug)]
pub struct User {
    /// Their name.
    pub name: String,
    /// Their role.
    pub role: Role,
    /// Their token's hash.
    pub token_hash: TokenHash,
}

/// The reverse proxy's headers, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedHeader {
    /// The header naming the user (lower case).
    pub user_header: String,
    /// The header naming the role (lower case).
    pub role_header: Option<String>,
    /// Roles by user name.
    pub roles: BTreeMap<String, Role>,
}

/// Validated console settings.
#[derive(Clone, Debug)]
pub struct ConsoleSettings {
    /// Where to listen.
    pub listen: String,
    /// The session key.
    pub session_key: Secret,
    /// A session's lifetime.
    pub session_lifetime: Duration,
    /// `Secure` cookies with `__Host-` names.
    pub secure_cookies: bool,
    /// How logins are limited.
    pub login: crate::auth::config::LoginLimits,
    /// Whether viewers see payloads.
    pub hide_payloads_from_viewer: bool,
    /// Records per page.
    pub page_size: usize,
    /// Records listed on a confirmation page.
    pub confirm_preview: usize,
    /// Token users.
    pub users: Vec<User>,
    /// The trusted proxy headers, when enabled.
    pub trusted_header: Option<TrustedHeader>,
    /// The overview and endpoints pages' settings, checked against the events topic when
    /// the console starts.
    pub insight: crate::insight::InsightConfig,
    /// Where the DLQ is archived to; `None`: archiving is off.
    pub archive_to: Option<ArchiveUrl>,
}

impl ConsoleConfig {
    /// Loads the config: the defaults, then the `[console]` section of `file` (when given),
    /// then `HOOKLINE_CONSOLE__<KEY>` variables. Unknown keys and wrong types are refused
    /// with the key named (`console.<key>`), never a value.
    pub fn load(file: Option<&Path>) -> Result<ConsoleConfig> {
        let mut figment = Figment::from(Serialized::defaults(ConsoleConfig::default()));
        if let Some(file) = file {
            if !file.exists() {
                return Err(ConsoleError::config(
                    "config file",
                    format!("{} does not exist", file.display()),
                ));
            }
            figment = figment.merge(Figment::from(Toml::file(file)).focus("console"));
        }
        figment = figment.merge(Env::prefixed("HOOKLINE_CONSOLE__").split("__"));
        figment.extract().map_err(|error| {
            let key = error.path.join(".");
            let field = if key.is_empty() {
                "[console]".to_owned()
            } else {
                format!("console.{key}")
            };
            ConsoleError::config(field, error.kind.to_string())
        })
    }

    /// Validates the config into settings; the error names the field.
    pub fn into_settings(self) -> Result<ConsoleSettings> {
        if self.listen.trim().is_empty() {
            return Err(ConsoleError::config("console.listen", "must not be empty"));
        }
        let session_key = self.session_key.ok_or_else(|| {
            ConsoleError::config(
                "console.session_key",
                "is required (at least 32 bytes; `${file:PATH}` keeps it out of the file)",
            )
        })?;
        if session_key.expose().len() < MIN_SESSION_KEY_BYTES {
            return Err(ConsoleError::config(
                "console.session_key",
                format!("must be at least {MIN_SESSION_KEY_BYTES} bytes"),
            ));
        }
        if self.session_lifetime_ms == 0 {
            return Err(ConsoleError::config(
                "console.session_lifetime_ms",
                "must be more than 0",
            ));
        }
        if !(1..=MAX_PAGE_SIZE).contains(&self.page_size) {
            return Err(ConsoleError::config(
                "console.page_size",
                format!("must be 1 to {MAX_PAGE_SIZE}"),
            ));
        }
        let secure_cookies = match self.secure_cookies {
            Some(false) if !is_loopback(&self.listen) => {
                return Err(ConsoleError::config(
                    "console.secure_cookies",
                    format!(
                        "may be false only when console.listen is a loopback address, not `{}`: \
                         a session cookie sent over plain HTTP can be read on the way",
                        self.listen.trim()
                    ),
                ));
            }
            Some(secure) => secure,
            None => !is_loopback(&self.listen),
        };
        let login = self.login.to_limits()?;
        if !(1..=MAX_PAGE_SIZE).contains(&self.confirm_preview) {
            return Err(ConsoleError::config(
                "console.confirm_preview",
                format!("must be 1 to {MAX_PAGE_SIZE}"),
            ));
        }
        let mut names = BTreeSet::new();
        let mut users = Vec::with_capacity(self.users.len());
        for (i, user) in self.users.into_iter().enumerate() {
            let field = |name: &str| format!("console.users[{i}].{name}");
            let name = user.name.trim();
            if name.is_empty() || name.chars().any(char::is_control) || name.len() > 200 {
                return Err(ConsoleError::config(
                    field("name"),
                    "must be 1 to 200 bytes without control characters",
                ));
            }
            if !names.insert(name.to_owned()) {
                return Err(ConsoleError::config(
                    field("name"),
                    format!("`{name}` is given twice"),
                ));
            }
            let token_hash = TokenHash::parse(&user.token_hash)
                .map_err(|reason| ConsoleError::config(field("token_hash"), reason))?;
            users.push(User {
                name: name.to_owned(),
                role: user.role,
                token_hash,
            });
        }
        let trusted_header = match self.trusted_header {
            Some(header) => Some(TrustedHeader {
                user_header: header_name("console.trusted_header", &header)?,
                role_header: self
                    .trusted_role_header
                    .as_deref()
                    .map(|h| header_name("console.trusted_role_header", h))
                    .transpose()?,
                roles: self.trusted_roles,
            }),
            None if self.trusted_role_header.is_some() => {
                return Err(ConsoleError::config(
                    "console.trusted_role_header",
                    "needs console.trusted_header",
                ));
            }
            None if !self.trusted_roles.is_empty() => {
                return Err(ConsoleError::config(
                    "console.trusted_roles",
                    "needs console.trusted_header",
                ));
            }
            None => None,
        };
        let archive_to = match self.archive_to.as_deref().map(str::trim) {
            None => None,
            Some("") => {
                return Err(ConsoleError::config(
                    "console.archive_to",
                    "must not be empty (leave it out to turn archiving off)",
                ));
            }
            Some(text) => Some(
                ArchiveUrl::parse(text)
                    .map_err(|e| ConsoleError::config("console.archive_to", e.to_string()))?,
            ),
        };
        if users.is_empty() && trusted_header.is_none() {
            return Err(ConsoleError::config(
                "console.users",
                "no one can log in: add a user (`hookline console hash-token` makes its \
                 token_hash) or set console.trusted_header",
            ));
        }
        Ok(ConsoleSettings {
            listen: self.listen.trim().to_owned(),
            session_key,
            session_lifetime: Duration::from_millis(self.session_lifetime_ms),
            secure_cookies,
            login,
            hide_payloads_from_viewer: self.hide_payloads_from_viewer,
            page_size: self.page_size,
            confirm_preview: self.confirm_preview,
            users,
            trusted_header,
            insight: self.insight.clone(),
            archive_to,
        })
    }
}

/// Whether `listen` (`host:port`) is a loopback address: `127.0.0.0/8`, `[::1]` or
/// `localhost`. Anything else (a name included) may be reached from elsewhere.
fn is_loopback(listen: &str) -> bool {
    let listen = listen.trim();
    if let Ok(addr) = listen.parse::<SocketAddr>() {
        return addr.ip().is_loopback();
    }
    listen
        .rsplit_once(':')
        .is_some_and(|(host, _)| host.eq_ignore_ascii_case("localhost"))
}

/// A header name as configured, checked and lower-cased.
fn header_name(field: &str, name: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(ConsoleError::config(
            field,
            "must be a header name (letters, digits and `-`)",
        ));
    }
    Ok(name.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::token::hash_token;

    const KEY: &str = "0123456789abcdef0123456789abcdef";

    fn config() -> ConsoleConfig {
        ConsoleConfig {
            session_key: Some(Secret::new(KEY)),
            users: vec![UserConfig {
                name: "alice".into(),
                role: Role::Operator,
                token_hash: hash_token("alice-token").expect("hash"),
            }],
            ..ConsoleConfig::default()
        }
    }

    fn field_of(config: ConsoleConfig) -> String {
        match config.into_settings() {
            Err(ConsoleError::Config { field, .. }) => field,
            other => panic!("not a config error: {other:?}"),
        }
    }

    #[test]
    fn a_valid_config_converts() {
        let settings = config().into_settings().expect("valid");
        assert_eq!(settings.listen, DEFAULT_LISTEN);
        assert_eq!(settings.users[0].role, Role::Operator);
        assert!(settings.hide_payloads_from_viewer);
        assert_eq!(settings.session_lifetime, Duration::from_secs(8 * 3600));
        assert_eq!(settings.login.max_concurrent, 2);
    }

    #[test]
    fn invalid_fields_are_named_and_secrets_never_shown() {
        let short = ConsoleConfig {
            session_key: Some(Secret::new("short-key-value")),
            ..config()
        };
        let error = short.clone().into_settings().expect_err("too short");
        assert!(!error.to_string().contains("short-key-value"), "{error}");
        assert_eq!(field_of(short), "console.session_key");
        let none = ConsoleConfig {
            session_key: None,
            ..config()
        };
        assert_eq!(field_of(none), "console.session_key");
        let mut twice = config();
        twice.users.push(twice.users[0].clone());
        assert_eq!(field_of(twice), "console.users[1].name");
        let mut clear = config();
        clear.users[0].token_hash = "alice-token".into();
        assert_eq!(field_of(clear), "console.users[0].token_hash");
        let nobody = ConsoleConfig {
            users: vec![],
            ..config()
        };
        assert_eq!(field_of(nobody), "console.users");
        let role_alone = ConsoleConfig {
            trusted_role_header: Some("X-Role".into()),
            ..config()
        };
        assert_eq!(field_of(role_alone), "console.trusted_role_header");
        let bad_header = ConsoleConfig {
            trusted_header: Some("X User".into()),
            ..config()
        };
        assert_eq!(field_of(bad_header), "console.trusted_header");
        let page = ConsoleConfig {
            page_size: 0,
            ..config()
        };
        assert_eq!(field_of(page), "console.page_size");
        let mut no_logins = config();
        no_logins.login.max_concurrent = 0;
        assert_eq!(field_of(no_logins), "console.login.max_concurrent");
        for bad in ["", "http://h/p/", "s3://key:hunter2@b/p/", "s3:///p/"] {
            let archive = ConsoleConfig {
                archive_to: Some(bad.into()),
                ..config()
            };
            let error = archive.clone().into_settings().expect_err(bad);
            assert!(!error.to_string().contains("hunter2"), "{error}");
            assert_eq!(field_of(archive), "console.archive_to", "{bad}");
        }
    }

    #[test]
    fn cookies_are_secure_unless_the_console_listens_on_loopback_and_it_is_asked_for() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("hookline.toml");
        let hash = hash_token("t0k3n").expect("hash");
        let load = |lines: &str| {
            std::fs::write(
                &path,
                format!(
                    "[console]\nsession_key = \"{KEY}\"\n{lines}\n\n\
                     [[console.users]]\nname = \"carol\"\nrole = \"viewer\"\ntoken_hash = \"{hash}\"\n"
                ),
            )
            .expect("write");
            ConsoleConfig::load(Some(&path)).and_then(ConsoleConfig::into_settings)
        };
        // Unless told: Secure, except on loopback (served over plain HTTP, as by default).
        for (listen, secure) in [
            ("127.0.0.1:8088", false),
            ("127.0.0.2:8088", false),
            ("localhost:8088", false),
            ("[::1]:8088", false),
            ("0.0.0.0:8088", true),
            ("[::]:8088", true),
            ("10.1.2.3:8088", true),
            ("console.internal:8088", true),
        ] {
            let settings = load(&format!("listen = \"{listen}\"")).expect(listen);
            assert_eq!(settings.secure_cookies, secure, "{listen}");
        }
        let settings = load("").expect("the default listen address");
        assert!(!settings.secure_cookies, "{}", settings.listen);
        // Asked for on loopback (behind a local HTTPS proxy): Secure.
        let settings = load("secure_cookies = true").expect("valid");
        assert!(settings.secure_cookies);
        // Turned off where others can connect: refused, naming the field.
        for listen in ["0.0.0.0:8088", "console.internal:8088"] {
            match load(&format!("listen = \"{listen}\"\nsecure_cookies = false")) {
                Err(ConsoleError::Config { field, reason }) => {
                    assert_eq!(field, "console.secure_cookies", "{reason}");
                }
                other => panic!("{listen}: secure_cookies = false is accepted: {other:?}"),
            }
        }
        let settings = load("secure_cookies = false").expect("off on loopback");
        assert!(!settings.secure_cookies);
    }

    #[test]
    fn archiving_is_off_unless_a_destination_is_given() {
        assert!(
            config()
                .into_settings()
                .expect("valid")
                .archive_to
                .is_none()
        );
        let on = ConsoleConfig {
            archive_to: Some(" s3://dlq-archive/prod/ ".into()),
            ..config()
        };
        let url = on.into_settings().expect("valid").archive_to.expect("on");
        assert_eq!(url.as_str(), "s3://dlq-archive/prod/");
        assert_eq!(url.prefix, "prod");
    }

    #[test]
    fn the_file_section_is_read_and_unknown_keys_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("hookline.toml");
        let hash = hash_token("t0k3n").expect("hash");
        std::fs::write(
            &path,
            format!(
                "[kafka]\nbootstrap_servers = \"x:9092\"\n\n[console]\nsession_key = \"{KEY}\"\n\
                 page_size = 20\ntrusted_header = \"X-Forwarded-User\"\n\
                 archive_to = \"file:///var/lib/hookline/archive/\"\n\n\
                 [console.trusted_roles]\nbob = \"admin\"\n\n\
                 [[console.users]]\nname = \"carol\"\nrole = \"viewer\"\ntoken_hash = \"{hash}\"\n"
            ),
        )
        .expect("write");
        let settings = ConsoleConfig::load(Some(&path))
            .expect("loads")
            .into_settings()
            .expect("valid");
        assert_eq!(settings.page_size, 20);
        let archive_to = settings.archive_to.as_ref().map(ArchiveUrl::as_str);
        assert_eq!(archive_to, Some("file:///var/lib/hookline/archive/"));
        assert_eq!(settings.users[0].name, "carol");
        let trusted = settings.trusted_header.expect("trusted header");
        assert_eq!(trusted.user_header, "x-forwarded-user");
        assert_eq!(trusted.roles.get("bob"), Some(&Role::Admin));

        std::fs::write(&path, "[console]\npage_sise = 20\n").expect("write");
        let error = ConsoleConfig::load(Some(&path)).expect_err("unknown key");
        assert!(error.to_string().contains("page_sise"), "{error}");
        std::fs::write(
            &path,
            "[console]\n[[console.users]]\nname = \"x\"\nrole = \"root\"\ntoken_hash = \"y\"\n",
        )
        .expect("write");
        let error = ConsoleConfig::load(Some(&path)).expect_err("unknown role");
        assert!(error.to_string().contains("console.users"), "{error}");
        let missing = ConsoleConfig::load(Some(&dir.path().join("none.toml")));
        assert!(missing.is_err());
    }
}
