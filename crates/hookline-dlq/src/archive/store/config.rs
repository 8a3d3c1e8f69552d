//! The `[archive]` section: how to reach the object store. Credentials left out here come
//! from the store's usual environment variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`).

use hookline_core::secret::Secret;
use serde::Deserialize;
use url::Url;

use super::error::StoreError;

/// The `[archive]` section of the config file (or `HOOKLINE_ARCHIVE__<KEY>` variables).
/// Every field is optional; the S3 ones apply to `s3://` URLs only.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ArchiveConfig {
    /// An S3-compatible server instead of AWS (MinIO, Ceph, a local test server), e.g.
    /// `http://127.0.0.1:9000`; requests are path-style (`<endpoint>/<bucket>/<key>`).
    pub endpoint_url: Option<String>,
    /// The S3 region (default: `AWS_REGION`, `AWS_DEFAULT_REGION`, else `us-east-1`).
    pub region: Option<String>,
    /// Allow a plain `http://` endpoint (a local server); refused otherwise.
    pub allow_http: bool,
    /// The S3 access key id, or `${env:NAME}` / `${file:PATH}` (default: `AWS_ACCESS_KEY_ID`).
    pub access_key_id: Option<Secret>,
    /// The S3 secret access key, or `${env:NAME}` / `${file:PATH}` (default:
    /// `AWS_SECRET_ACCESS_KEY`). Never printed.
    pub secret_access_key: Option<Secret>,
    /// An S3 session token for temporary credentials, or `${env:NAME}` / `${file:PATH}`.
    pub session_token: Option<Secret>,
}

/// Validated [`ArchiveConfig`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreSettings {
    /// The S3-compatible endpoint, parsed.
    pub endpoint: Option<Url>,
    /// The S3 region.
    pub region: Option<String>,
    /// Plain HTTP allowed.
    pub allow_http: bool,
    /// Static S3 credentials: access key id, secret, optional session token.
    pub credentials: Option<S3Credentials>,
}

/// Static S3 credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Credentials {
    /// The access key id.
    pub access_key_id: Secret,
    /// The secret access key.
    pub secret_access_key: Secret,
    /// A session token.
    pub session_token: Option<Secret>,
}

impl ArchiveConfig {
    /// Checks the section; an error names the field.
    pub fn into_settings(self) -> Result<StoreSettings, StoreError> {
        let config_error = |field, problem: &str| StoreError::Config {
            field,
            problem: problem.to_owned(),
        };
        let endpoint = match self.endpoint_url.as_deref().map(str::trim) {
            None => None,
            Some("") => return Err(config_error("endpoint_url", "must not be empty")),
            Some(text) => {
                let url = Url::parse(text).map_err(|e| StoreError::Config {
                    field: "endpoint_url",
                    problem: format!("not a URL ({e})"),
                })?;
                match url.scheme() {
                    "https" => {}
                    "http" if self.allow_http => {}
                    "http" => {
                        return Err(config_error(
                            "endpoint_url",
                            "is plain http://: set archive.allow_http = true for a local server",
                        ));
                    }
                    _ => {
                        return Err(config_error(
                            "endpoint_url",
                            "must be an http:// or https:// URL",
                        ));
                    }
                }
                if !url.username().is_empty() || url.password().is_some() {
                    return Err(config_error(
                        "endpoint_url",
                        "must not hold credentials: use access_key_id and secret_access_key",
                    ));
                }
                Some(url)
            }
        };
        let region = match self.region.as_deref().map(str::trim) {
            None => None,
            Some("") => return Err(config_error("region", "must not be empty")),
            Some(r) => Some(r.to_owned()),
        };
        let credentials = match (self.access_key_id, self.secret_access_key) {
            (None, None) => {
                if self.session_token.is_some() {
                    return Err(config_error(
                        "session_token",
                        "is given without access_key_id and secret_access_key",
                    ));
                }
                None
            }
            (Some(_), None) => {
                return Err(config_error(
                    "secret_access_key",
                    "is missing (access_key_id is given)",
                ));
            }
            (None, Some(_)) => {
                return Err(config_error(
                    "access_key_id",
                    "is missing (secret_access_key is given)",
                ));
            }
            (Some(access_key_id), Some(secret_access_key)) => {
                for (field, value) in [
                    ("access_key_id", &access_key_id),
                    ("secret_access_key", &secret_access_key),
                ] {
                    if value.expose().trim().is_empty() {
                        return Err(config_error(field, "must not be empty"));
                    }
                }
                Some(S3Credentials {
                    access_key_id,
                    secret_access_key,
                    session_token: self.session_token,
                })
            }
        };
        Ok(StoreSettings {
            endpoint,
            region,
            allow_http: self.allow_http,
            credentials,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml_text: &str) -> ArchiveConfig {
        toml::from_str(toml_text).expect("an [archive] section")
    }

    fn field_of(result: Result<StoreSettings, StoreError>) -> (&'static str, String) {
        match result {
            Err(StoreError::Config { field, problem }) => (field, problem),
            other => panic!("not a config error: {other:?}"),
        }
    }

    #[test]
    fn a_local_s3_server() {
        let settings = config(
            r#"
            endpoint_url = "http://127.0.0.1:9000"
            region = "eu-west-1"
            allow_http = true
            access_key_id = "AKIDEXAMPLE"
            secret_access_key = "wJalrXUtnFEMI"
            "#,
        )
        .into_settings()
        .expect("valid");
        assert_eq!(
            settings.endpoint.as_ref().map(Url::as_str),
            Some("http://127.0.0.1:9000/")
        );
        assert_eq!(settings.region.as_deref(), Some("eu-west-1"));
        let credentials = settings.credentials.expect("credentials");
        assert_eq!(credentials.secret_access_key.expose(), "wJalrXUtnFEMI");
        assert!(
            !format!("{credentials:?}").contains("wJalrXUtnFEMI"),
            "the secret is never printed"
        );
        assert_eq!(
            ArchiveConfig::default().into_settings().expect("empty"),
            StoreSettings::default()
        );
    }

    #[test]
    fn errors_name_the_field_and_never_the_secret() {
        let http = config(r#"endpoint_url = "http://127.0.0.1:9000""#).into_settings();
        let (field, problem) = field_of(http);
        assert_eq!(field, "endpoint_url");
        assert!(problem.contains("allow_http"), "{problem}");
        let (field, _) = field_of(config(r#"endpoint_url = "not a url""#).into_settings());
        assert_eq!(field, "endpoint_url");
        let (field, _) = field_of(config(r#"endpoint_url = "ftp://h/""#).into_settings());
        assert_eq!(field, "endpoint_url");
        let with_password = config(r#"endpoint_url = "https://u:hunter2@h/""#).into_settings();
        let error = with_password.expect_err("refused");
        assert!(!error.to_string().contains("hunter2"), "{error}");
        let (field, _) = field_of(config(r#"region = " ""#).into_settings());
        assert_eq!(field, "region");
        let only_key = config(r#"access_key_id = "AKID""#).into_settings();
        let error = only_key.expect_err("refused");
        assert_eq!(
            error.to_string(),
            "archive.secret_access_key: is missing (access_key_id is given)"
        );
        let only_secret = config(r#"secret_access_key = "s3cr3t""#).into_settings();
        let error = only_secret.expect_err("refused");
        assert!(
            error.to_string().starts_with("archive.access_key_id:"),
            "{error}"
        );
        assert!(!error.to_string().contains("s3cr3t"));
        let (field, _) = field_of(config(r#"session_token = "t""#).into_settings());
        assert_eq!(field, "session_token");
    }

    #[test]
    fn unknown_keys_are_refused() {
        let error = toml::from_str::<ArchiveConfig>("allow_htp = true").expect_err("unknown");
        assert!(error.to_string().contains("allow_htp"), "{error}");
    }
}
