//! How to reach the registry: the user-facing settings (URL, timeout, basic auth or a bearer
//! token, extra CA certificates), validated into what the clients apply.

use std::fmt;
use std::path::{Path, PathBuf};

use hookline_core::secret::Secret;
use hookline_core::url_guard::redact_url;
use serde::{Deserialize, Serialize};

/// How to reach the registry.
///
/// `password` and `token` are secrets: given in clear or, better, as `${env:NAME}` or
/// `${file:PATH}` references; they are never serialized, logged or shown by `Debug`.
#[derive(Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RegistrySettings {
    /// Base URL of the Confluent-compatible API, e.g.
    /// `http://127.0.0.1:8081/apis/ccompat/v7`. Without user info: credentials go in
    /// `username`/`password` or `token`.
    #[serde(default = "default_url")]
    pub url: String,
    /// Timeout of one registry call, in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// User name for HTTP basic authentication (with `password`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Password for HTTP basic authentication (with `username`).
    #[serde(default, skip_serializing)]
    pub password: Option<Secret>,
    /// Bearer token (`Authorization: Bearer ...`), instead of basic authentication.
    #[serde(default, skip_serializing)]
    pub token: Option<Secret>,
    /// A PEM file of extra root certificates to trust for an `https` registry (a private
    /// CA), besides the system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

fn default_url() -> String {
    "http://127.0.0.1:8081/apis/ccompat/v7".to_owned()
}

fn default_timeout_ms() -> u64 {
    10_000
}

impl Default for RegistrySettings {
    fn default() -> Self {
        RegistrySettings {
            url: default_url(),
            timeout_ms: default_timeout_ms(),
            username: None,
            password: None,
            token: None,
            ca_file: None,
        }
    }
}

impl fmt::Debug for RegistrySettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistrySettings")
            .field("url", &redact_url(&self.url))
            .field("timeout_ms", &self.timeout_ms)
            .field("username", &self.username)
            .field("password", &self.password)
            .field("token", &self.token)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// Registry settings that cannot be used. The message names the field, never a secret.
#[derive(Debug, thiserror::Error)]
pub enum RegistrySettingsError {
    /// The URL does not parse or is not `http(s)`.
    #[error("`registry.url` must be an http(s) URL, not {url}")]
    Url {
        /// The URL, redacted.
        url: String,
    },
    /// The URL holds a user name or password.
    #[error(
        "`registry.url` must not hold credentials (`user:password@`): set `registry.username` \
         and `registry.password` (or `registry.token`) instead"
    )]
    UserInfo,
    /// The URL has a query or a fragment (paths are appended to the base URL, and a query
    /// is no place for a credential).
    #[error("`registry.url` must not have a query or fragment: {url}")]
    Query {
        /// The URL, redacted.
        url: String,
    },
    /// Basic and bearer authentication at once.
    #[error(
        "`registry.token` cannot be used with `registry.username`/`registry.password`: choose \
         basic authentication or a bearer token"
    )]
    BasicAndBearer,
    /// A user name without a password.
    #[error("`registry.username` is set without `registry.password`")]
    UsernameWithoutPassword,
    /// A password without a user name.
    #[error("`registry.password` is set without `registry.username`")]
    PasswordWithoutUsername,
    /// An empty user name, password or token.
    #[error("`{field}` is empty")]
    Empty {
        /// The field.
        field: &'static str,
    },
    /// The CA file cannot be read.
    #[error("`registry.ca_file`: cannot read {}", path.display())]
    CaFileUnreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The CA file holds no usable PEM certificate.
    #[error("`registry.ca_file`: {} holds no valid PEM certificate", path.display())]
    CaFileInvalid {
        /// The file.
        path: PathBuf,
        /// The TLS library's error, when it had one.
        #[source]
        source: Option<reqwest::Error>,
    },
}

impl RegistrySettingsError {
    /// The setting at fault, as a dotted path.
    pub fn field(&self) -> &'static str {
        match self {
            RegistrySettingsError::Url { .. }
            | RegistrySettingsError::UserInfo
            | RegistrySettingsError::Query { .. } => "registry.url",
            RegistrySettingsError::BasicAndBearer => "registry.token",
            RegistrySettingsError::UsernameWithoutPassword => "registry.password",
            RegistrySettingsError::PasswordWithoutUsername => "registry.username",
            RegistrySettingsError::Empty { field } => field,
            RegistrySettingsError::CaFileUnreadable { .. }
            | RegistrySettingsError::CaFileInvalid { .. } => "registry.ca_file",
        }
    }
}

/// How requests authenticate.
#[derive(Clone, Debug)]
pub(crate) enum Auth {
    /// Not at all.
    None,
    /// HTTP basic authentication.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: Secret,
    },
    /// A bearer token.
    Bearer(Secret),
}

/// Validated settings: what the clients are built from.
pub(crate) struct Validated {
    /// The base URL, without a final `/`.
    pub(crate) url: String,
    /// The URL as errors and logs show it.
    pub(crate) shown_url: String,
    pub(crate) auth: Auth,
    pub(crate) ca_certificates: Vec<reqwest::Certificate>,
}

impl RegistrySettings {
    /// Checks the settings without building a client: the URL, the credentials and the CA
    /// file. Errors name the field.
    pub fn validate(&self) -> Result<(), RegistrySettingsError> {
        self.validated().map(drop)
    }

    pub(crate) fn validated(&self) -> Result<Validated, RegistrySettingsError> {
        let url = self.url.trim_end_matches('/');
        let parsed = reqwest::Url::parse(url).map_err(|_| RegistrySettingsError::Url {
            url: redact_url(url),
        })?;
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(RegistrySettingsError::UserInfo);
        }
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(RegistrySettingsError::Url {
                url: redact_url(url),
            });
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(RegistrySettingsError::Query {
                url: redact_url(url),
            });
        }
        let auth = self.auth()?;
        let ca_certificates = match &self.ca_file {
            Some(path) => read_ca_file(path)?,
            None => Vec::new(),
        };
        Ok(Validated {
            url: url.to_owned(),
            shown_url: redact_url(url),
            auth,
            ca_certificates,
        })
    }

    fn auth(&self) -> Result<Auth, RegistrySettingsError> {
        let non_empty = |field, value: &str| {
            if value.is_empty() {
                Err(RegistrySettingsError::Empty { field })
            } else {
                Ok(())
            }
        };
        match (&self.username, &self.password, &self.token) {
            (None, None, None) => Ok(Auth::None),
            (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
                Err(RegistrySettingsError::BasicAndBearer)
            }
            (None, None, Some(token)) => {
                non_empty("registry.token", token.expose())?;
                Ok(Auth::Bearer(token.clone()))
            }
            (Some(username), Some(password), None) => {
                non_empty("registry.username", username)?;
                non_empty("registry.password", password.expose())?;
                Ok(Auth::Basic {
                    username: username.clone(),
                    password: password.clone(),
                })
            }
            (Some(_), None, None) => Err(RegistrySettingsError::UsernameWithoutPassword),
            (None, Some(_), None) => Err(RegistrySettingsError::PasswordWithoutUsername),
        }
    }
}

fn read_ca_file(path: &Path) -> Result<Vec<reqwest::Certificate>, RegistrySettingsError> {
    let pem = std::fs::read(path).map_err(|source| RegistrySettingsError::CaFileUnreadable {
        path: path.to_owned(),
        source,
    })?;
    let certificates = reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| {
        RegistrySettingsError::CaFileInvalid {
            path: path.to_owned(),
            source: Some(source.without_url()),
        }
    })?;
    if certificates.is_empty() {
        return Err(RegistrySettingsError::CaFileInvalid {
            path: path.to_owned(),
            source: None,
        });
    }
    Ok(certificates)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWORD: &str = "pa55-w0rd-9f3b";
    const TOKEN: &str = "tok-e7c1d0a2b9";

    fn settings() -> RegistrySettings {
        RegistrySettings {
            url: "https://registry.example.com/apis/ccompat/v7".to_owned(),
            ..RegistrySettings::default()
        }
    }

    fn basic() -> RegistrySettings {
        RegistrySettings {
            username: Some("hookline".to_owned()),
            password: Some(Secret::new(PASSWORD)),
            ..settings()
        }
    }

    fn refusal(settings: &RegistrySettings) -> RegistrySettingsError {
        settings.validate().expect_err("refused")
    }

    #[test]
    fn basic_auth_or_a_token_or_nothing_are_accepted() {
        assert!(settings().validate().is_ok());
        assert!(basic().validate().is_ok());
        let bearer = RegistrySettings {
            token: Some(Secret::new(TOKEN)),
            ..settings()
        };
        assert!(bearer.validate().is_ok());
    }

    #[test]
    fn a_url_with_credentials_is_refused_naming_the_field_without_them() {
        let with_user_info = RegistrySettings {
            url: format!("https://hookline:{PASSWORD}@registry.example.com/apis/ccompat/v7"),
            ..RegistrySettings::default()
        };
        let error = refusal(&with_user_info);
        let message = error.to_string();
        assert_eq!(error.field(), "registry.url");
        assert!(message.contains("`registry.url`"), "{message}");
        assert!(message.contains("registry.username"), "{message}");
        assert!(!message.contains(PASSWORD), "{message}");
        assert!(!message.contains("hookline:"), "{message}");
        let debug = format!("{with_user_info:?}");
        assert!(!debug.contains(PASSWORD), "{debug}");
    }

    #[test]
    fn inconsistent_credentials_are_refused_naming_the_field() {
        let both = RegistrySettings {
            token: Some(Secret::new(TOKEN)),
            ..basic()
        };
        let cases = [
            (both, "registry.token"),
            (
                RegistrySettings {
                    password: None,
                    ..basic()
                },
                "registry.password",
            ),
            (
                RegistrySettings {
                    username: None,
                    ..basic()
                },
                "registry.username",
            ),
            (
                RegistrySettings {
                    url: "ftp://registry.example.com".to_owned(),
                    ..settings()
                },
                "registry.url",
            ),
            (
                RegistrySettings {
                    url: format!("https://registry.example.com/apis?api_key={TOKEN}"),
                    ..settings()
                },
                "registry.url",
            ),
        ];
        for (settings, field) in cases {
            let error = refusal(&settings);
            let message = error.to_string();
            assert_eq!(error.field(), field, "{message}");
            assert!(message.contains(field), "{message}");
            assert!(
                !message.contains(PASSWORD) && !message.contains(TOKEN),
                "{message}"
            );
        }
    }

    #[test]
    fn an_unreadable_or_invalid_ca_file_is_refused_naming_the_field_and_the_path() {
        let dir = tempfile::tempdir().expect("temp dir");
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not a certificate\n").expect("write");
        let broken = dir.path().join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\nbm90IGRlcg==\n-----END CERTIFICATE-----\n",
        )
        .expect("write");
        for path in [dir.path().join("absent.pem"), garbage, broken] {
            let with_ca = RegistrySettings {
                ca_file: Some(path.clone()),
                ..basic()
            };
            let message = refusal(&with_ca).to_string();
            assert!(message.contains("`registry.ca_file`"), "{message}");
            assert!(message.contains(&path.display().to_string()), "{message}");
            assert!(!message.contains(PASSWORD), "{message}");
        }
    }

    #[test]
    fn debug_and_serialization_never_show_a_secret() {
        for settings in [
            basic(),
            RegistrySettings {
                token: Some(Secret::new(TOKEN)),
                ..settings()
            },
        ] {
            let debug = format!("{settings:?}");
            assert!(
                !debug.contains(PASSWORD) && !debug.contains(TOKEN),
                "{debug}"
            );
            assert!(debug.contains("<redacted>"), "{debug}");
            let json = serde_json::to_string(&settings).expect("serializes");
            assert!(!json.contains(PASSWORD) && !json.contains(TOKEN), "{json}");
        }
    }

    #[test]
    fn a_registry_client_shows_no_secret_and_refuses_what_validation_refuses() {
        for settings in [
            basic(),
            RegistrySettings {
                token: Some(Secret::new(TOKEN)),
                ..settings()
            },
        ] {
            let registry = crate::Registry::new(&settings).expect("a client");
            let debug = format!("{registry:?}");
            assert!(
                !debug.contains(PASSWORD) && !debug.contains(TOKEN),
                "{debug}"
            );
            assert!(debug.contains("registry.example.com"), "{debug}");
        }
        let with_user_info = RegistrySettings {
            url: format!("https://hookline:{PASSWORD}@registry.example.com/"),
            ..RegistrySettings::default()
        };
        let error = crate::Registry::new(&with_user_info).expect_err("refused");
        assert!(!error.is_transient());
        assert!(error.to_string().contains("`registry.url`"), "{error}");
        for text in [error.to_string(), format!("{error:?}")] {
            assert!(!text.contains(PASSWORD), "{text}");
        }
    }

    #[test]
    fn secrets_are_read_from_references() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("password");
        std::fs::write(&file, format!("{PASSWORD}\n")).expect("write");
        let json = serde_json::json!({
            "url": "https://registry.example.com",
            "username": "hookline",
            "password": format!("${{file:{}}}", file.display()),
        });
        let settings: RegistrySettings = serde_json::from_value(json).expect("deserializes");
        assert_eq!(
            settings.password.as_ref().map(Secret::expose),
            Some(PASSWORD)
        );
    }
}
