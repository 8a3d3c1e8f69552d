//! Secrets in configuration: passwords, tokens and keys that must never reach a log line,
//! an error message, `Debug` output or the process list.
//!
//! A secret is given in clear or, better, as a reference resolved when the config is read,
//! in the syntax of Kafka's config providers: `${env:NAME}` (an environment variable) or
//! `${file:/path/to/file}` (the file's contents, without a final newline). Errors name the
//! reference, never what it resolves to.

use std::fmt;
use std::path::PathBuf;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer};
use subtle::ConstantTimeEq;

/// A secret value, kept in a `secrecy::SecretString` (wiped from memory when dropped). Its
/// `Debug` and `Display` show `<redacted>`; [`Secret::expose`] gives the value to the one
/// place that sends it; two secrets compare in constant time.
#[derive(Clone)]
pub struct Secret(SecretString);

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.expose()
            .as_bytes()
            .ct_eq(other.expose().as_bytes())
            .into()
    }
}

impl Eq for Secret {}

/// A secret reference that cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// `${env:NAME}` names a variable that is not set (or not Unicode).
    #[error("environment variable `{name}` is not set")]
    MissingEnv {
        /// The variable's name.
        name: String,
    },
    /// `${file:PATH}` names a file that cannot be read.
    #[error("cannot read secret file {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A reference resolved to nothing.
    #[error("secret reference `{reference}` is empty")]
    Empty {
        /// The reference as written.
        reference: String,
    },
    /// `${...}` with another provider than `env` or `file`.
    #[error("unknown secret reference `{reference}`: use `${{env:NAME}}` or `${{file:PATH}}`")]
    UnknownProvider {
        /// The reference as written (it holds no secret).
        reference: String,
    },
}

/// Whether `text` is written as a reference (`${...}`) rather than a value in clear.
pub fn is_reference(text: &str) -> bool {
    text.starts_with("${") && text.ends_with('}')
}

impl Secret {
    /// A secret given in clear (already resolved).
    pub fn new(value: impl Into<String>) -> Self {
        Secret(SecretString::from(value.into()))
    }

    /// Resolves `text`: `${env:NAME}`, `${file:PATH}`, or else the value itself.
    pub fn resolve(text: &str) -> Result<Self, SecretError> {
        if !is_reference(text) {
            return Ok(Secret::new(text));
        }
        let inner = &text[2..text.len() - 1];
        let value = if let Some(name) = inner.strip_prefix("env:") {
            std::env::var(name).map_err(|_| SecretError::MissingEnv {
                name: name.to_owned(),
            })?
        } else if let Some(path) = inner.strip_prefix("file:") {
            let path = PathBuf::from(path);
            let mut value = std::fs::read_to_string(&path)
                .map_err(|source| SecretError::File { path, source })?;
            let trimmed = value.trim_end_matches(['\n', '\r']).len();
            value.truncate(trimmed);
            value
        } else {
            return Err(SecretError::UnknownProvider {
                reference: text.to_owned(),
            });
        };
        if value.is_empty() {
            return Err(SecretError::Empty {
                reference: text.to_owned(),
            });
        }
        Ok(Secret::new(value))
    }

    /// The value, for the one place that sends it. Never log it.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Deserializes from a string, resolving references; a failure names the reference only.
impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Secret::resolve(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_values_and_references_resolve() {
        assert_eq!(
            Secret::resolve("hunter2").expect("clear").expose(),
            "hunter2"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("password");
        std::fs::write(&file, "s3cret\n").expect("write");
        let reference = format!("${{file:{}}}", file.display());
        assert_eq!(
            Secret::resolve(&reference).expect("file").expose(),
            "s3cret"
        );
        // PATH is set wherever tests run.
        let path = std::env::var("PATH").expect("PATH");
        assert_eq!(Secret::resolve("${env:PATH}").expect("env").expose(), path);
    }

    #[test]
    fn failures_name_the_reference_never_a_value() {
        let missing = Secret::resolve("${env:HOOKLINE_NO_SUCH_VARIABLE_9F}").expect_err("unset");
        assert!(
            missing.to_string().contains("HOOKLINE_NO_SUCH_VARIABLE_9F"),
            "{missing}"
        );
        let file = Secret::resolve("${file:/nonexistent/hookline/secret}").expect_err("absent");
        assert!(
            file.to_string().contains("/nonexistent/hookline/secret"),
            "{file}"
        );
        let unknown = Secret::resolve("${vault:kv/x}").expect_err("provider");
        assert!(matches!(unknown, SecretError::UnknownProvider { .. }));
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret:?} {secret}"), "<redacted> <redacted>");
        let parsed: Secret = serde_json::from_str("\"hunter2\"").expect("json");
        assert_eq!(parsed.expose(), "hunter2");
    }
}
