//! Reading the static endpoints file, JSON or TOML, with errors that name the field and its
//! line and column but never echo the file's text: toml's and serde_json's own messages quote
//! the source line or the refused value, which hold secrets and header credentials.

use std::collections::BTreeMap;

use hookline_core::endpoint::{EndpointConfig, ShapeError, from_json_slice};
use serde::Deserialize;

/// The static endpoints file: `{"endpoints": {"<id>": {<endpoint config>}}}` as JSON, or the
/// same as TOML (`[endpoints.<id>]` tables).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EndpointsFile {
    pub(super) endpoints: BTreeMap<String, EndpointConfig>,
}

/// Parses the file's `text`, as JSON when `json`, else as TOML.
pub(super) fn parse(text: &str, json: bool) -> Result<EndpointsFile, ShapeError> {
    if json {
        return from_json_slice(text.as_bytes());
    }
    let deserializer =
        toml::Deserializer::parse(text).map_err(|error| toml_error("", &error, text))?;
    serde_path_to_error::deserialize(deserializer)
        .map_err(|error| toml_error(&error.path().to_string(), error.inner(), text))
}

/// A toml error as a [`ShapeError`]: its bare message (without the quoted source line that
/// its `Display` adds) and the line and column of its span.
fn toml_error(path: &str, error: &toml::de::Error, text: &str) -> ShapeError {
    let at = error.span().map(|span| line_column(text, span.start));
    ShapeError::new(path, error.message(), at)
}

/// The line and column (both from 1, the column in characters) of byte `offset` of `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn a_toml_type_error_names_the_field_and_line_but_not_the_text() {
        let text = format!(
            "[endpoints.ep-1]\nurl = \"https://example.com/hook\"\nsecrets = \"{SECRET}\"\n"
        );
        let error = parse(&text, false).expect_err("a string is not a list");
        let message = error.to_string();
        assert!(
            !message.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            "{message}"
        );
        assert_eq!(error.path, "endpoints.ep-1.secrets");
        assert_eq!(error.problem, "invalid type, expected a sequence");
        assert_eq!(error.at, Some((3, 11)));
    }

    #[test]
    fn a_toml_syntax_error_gives_the_place_not_the_line() {
        let text = format!(
            "[endpoints.ep-1]\nurl = \"https://example.com/hook\"\nsecrets = [\"{SECRET}\"\nheaders = {{ Authorization = \"Bearer tok_TOPSECRET\" }}\n"
        );
        let error = parse(&text, false).expect_err("an unclosed list");
        let message = error.to_string();
        assert!(
            !message.contains("MfKQ9r8") && !message.contains("TOPSECRET"),
            "{message}"
        );
        assert!(error.at.is_some(), "{message}");
    }

    #[test]
    fn a_json_type_error_names_the_field_but_not_the_value() {
        let text = format!(
            r#"{{"endpoints": {{"ep-1": {{"url": "https://example.com/hook", "secrets": ["{SECRET}"], "headers": {{"Authorization": 7}}, "timeout_ms": "{SECRET}"}}}}}}"#
        );
        let error = parse(&text, true).expect_err("a string is not a number");
        assert_eq!(error.path, "endpoints.ep-1.headers.Authorization");
        let text = text.replace(r#""Authorization": 7"#, r#""Authorization": "x""#);
        let error = parse(&text, true).expect_err("a string is not a number");
        assert_eq!(error.path, "endpoints.ep-1.timeout_ms");
        assert!(!error.to_string().contains("MfKQ9r8"), "{error}");
    }

    #[test]
    fn valid_files_parse() {
        let text = format!(
            "[endpoints.ep-1]\nurl = \"https://example.com/hook\"\nsecrets = [\"{SECRET}\"]\n"
        );
        let file = parse(&text, false).expect("valid");
        assert_eq!(file.endpoints["ep-1"].url, "https://example.com/hook");
        assert_eq!(line_column("ab\ncdé f", 8), (2, 5));
    }
}
