//! The credential flags of `hookline endpoints put` (client certificate and key, receiver
//! CA, bearer or basic `Authorization`) and how `endpoints list` shows them: hints only,
//! never a key, token or password.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use hookline_core::endpoint::{EndpointConfig, ReceiverAuth, secret_hint};
use hookline_core::secret::{Secret, is_reference};

/// The credential flags of `endpoints put`. Secrets may be given as `${env:NAME}` or
/// `${file:PATH}` (resolved here, so they stay out of the shell history and process list).
#[derive(Debug, Default, clap::Args)]
pub struct CredentialArgs {
    /// PEM client certificate chain presented to the receiver (mTLS); needs --client-key.
    #[arg(long, value_name = "FILE", requires = "client_key")]
    client_cert: Option<PathBuf>,
    /// PEM private key of --client-cert: a file, or `${file:PATH}` / `${env:NAME}`.
    #[arg(long, value_name = "FILE", requires = "client_cert")]
    client_key: Option<String>,
    /// PEM CA certificates trusted for the receiver's certificate (a private CA).
    #[arg(long, value_name = "FILE")]
    server_ca: Option<PathBuf>,
    /// A token sent as `Authorization: Bearer <token>`; better `${env:NAME}` or
    /// `${file:PATH}` than the token itself.
    #[arg(long, value_name = "TOKEN", conflicts_with = "basic_auth")]
    bearer_token: Option<String>,
    /// `USER:PASS` sent as basic `Authorization`; the whole value, or PASS, may be a
    /// `${env:NAME}` / `${file:PATH}` reference.
    #[arg(long, value_name = "USER:PASS")]
    basic_auth: Option<String>,
}

fn read_pem(flag: &str, path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("{flag}: cannot read {}", path.display()))
}

fn resolve(flag: &str, text: &str) -> anyhow::Result<Secret> {
    Secret::resolve(text).map_err(|error| anyhow!("{flag}: {error}"))
}

impl CredentialArgs {
    /// `config` with the credentials these flags give.
    pub fn apply(&self, mut config: EndpointConfig) -> anyhow::Result<EndpointConfig> {
        if let Some(path) = &self.client_cert {
            config.client_certificate = Some(read_pem("--client-cert", path)?);
        }
        if let Some(key) = &self.client_key {
            let key = if is_reference(key) {
                resolve("--client-key", key)?
            } else {
                Secret::new(read_pem("--client-key", Path::new(key))?)
            };
            config.client_key = Some(key);
        }
        if let Some(path) = &self.server_ca {
            config.server_ca = Some(read_pem("--server-ca", path)?);
        }
        if let Some(token) = &self.bearer_token {
            config.auth = Some(ReceiverAuth::Bearer {
                token: resolve("--bearer-token", token)?,
            });
        }
        if let Some(pair) = &self.basic_auth {
            let pair = if is_reference(pair) {
                resolve("--basic-auth", pair)?.expose().to_owned()
            } else {
                pair.clone()
            };
            let Some((username, password)) = pair.split_once(':') else {
                bail!("--basic-auth: give USER:PASS");
            };
            config.auth = Some(ReceiverAuth::Basic {
                username: username.to_owned(),
                password: resolve("--basic-auth", password)?,
            });
        }
        Ok(config)
    }
}

/// The `put` flag of a credential field, or the field itself for any other.
pub fn credential_flag(field: &str) -> &str {
    match field {
        "client_certificate" => "--client-cert",
        "client_key" => "--client-key",
        "server_ca" => "--server-ca",
        "auth.token" => "--bearer-token",
        "auth.username" | "auth.password" => "--basic-auth",
        header if header.eq_ignore_ascii_case("headers.authorization") => "--header",
        other => other,
    }
}

/// The listing's cell: `mtls`, `ca`, `bearer(…abcd)` or `basic(user)`, or `-`.
pub fn credentials_cell(config: &EndpointConfig) -> String {
    let mut parts = Vec::new();
    if config.client_certificate.is_some() {
        parts.push("mtls".to_owned());
    }
    if config.server_ca.is_some() {
        parts.push("ca".to_owned());
    }
    match &config.auth {
        Some(ReceiverAuth::Bearer { token }) => {
            parts.push(format!("bearer({})", secret_hint(token)))
        }
        Some(ReceiverAuth::Basic { username, .. }) => parts.push(format!("basic({username})")),
        None => {}
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(",")
    }
}

/// Replaces the secrets of a listed config's JSON by hints.
pub fn redact_credentials(
    config: &EndpointConfig,
    object: &mut serde_json::Map<String, serde_json::Value>,
) {
    if config.client_key.is_some() {
        object.insert("client_key".into(), "<redacted>".into());
    }
    match &config.auth {
        Some(ReceiverAuth::Bearer { token }) => {
            object.insert(
                "auth".into(),
                serde_json::json!({"type": "bearer", "token": secret_hint(token)}),
            );
        }
        Some(ReceiverAuth::Basic { username, password }) => {
            object.insert(
                "auth".into(),
                serde_json::json!({"type": "basic", "username": username, "password": secret_hint(password)}),
            );
        }
        None => {}
    }
}
