//! Config text that does not fit the config's shape, told without any of its values.
//!
//! serde's messages quote the value they refused (`invalid type: string "whsec_...",
//! expected a sequence`), and a config's values are secrets, tokens and header credentials.
//! A [`ShapeError`] names the field (its path, through `serde_path_to_error`), where it is
//! (line and column) and what was expected, and leaves the value out.

use std::fmt;

use serde::de::DeserializeOwned;

/// Where and why a config text does not fit its shape. Never holds a value of the text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ShapeError {
    /// The field, e.g. `secrets`, `retry.base_ms` or `endpoints.ep-1.headers`; empty for
    /// the text as a whole (a syntax error, or not an object).
    pub path: String,
    /// What is wrong, e.g. `invalid type, expected a sequence`.
    pub problem: String,
    /// Where: line and column, both from 1, when known.
    pub at: Option<(usize, usize)>,
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.path.is_empty() {
            write!(f, "`{}`: ", self.path)?;
        }
        f.write_str(&self.problem)?;
        if let Some((line, column)) = self.at {
            write!(f, " (line {line}, column {column})")?;
        }
        Ok(())
    }
}

impl ShapeError {
    /// The error of a deserializer's `message` at `path`, with the value left out.
    pub fn new(path: impl Into<String>, message: &str, at: Option<(usize, usize)>) -> Self {
        let path = path.into();
        ShapeError {
            path: if path == "." { String::new() } else { path },
            problem: without_values(message),
            at,
        }
    }

    /// The error of `serde_json`, found at `path`.
    pub fn from_json(path: impl Into<String>, error: &serde_json::Error) -> Self {
        let at = (error.line() > 0).then(|| (error.line(), error.column()));
        let text = error.to_string();
        // serde_json appends ` at line L column C`, which `at` holds.
        let message = match at {
            Some((line, column)) => text
                .strip_suffix(&format!(" at line {line} column {column}"))
                .unwrap_or(&text),
            None => &text,
        };
        ShapeError::new(path, message, at)
    }
}

/// Parses JSON into `T`, naming the field of a misfit and never its value.
pub fn from_json_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ShapeError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|error| ShapeError::from_json(error.path().to_string(), error.inner()))?;
    deserializer
        .end()
        .map_err(|error| ShapeError::from_json(String::new(), &error))?;
    Ok(value)
}

/// `message` without the value it quotes. serde's own messages put the refused value
/// between the kind and `, expected ...` (`invalid type: string "x", expected a sequence`,
/// `invalid value: ...`, ``unknown variant `x`, expected ...``): only the kind and what was
/// expected are kept. The last `, expected ` is the one serde wrote, whatever the value
/// holds. Field names (`missing field`, `unknown field`) and syntax errors hold no value and
/// are kept as they are.
pub fn without_values(message: &str) -> String {
    const KINDS: [(&str, &str); 3] = [
        ("invalid type: ", "invalid type"),
        ("invalid value: ", "invalid value"),
        ("unknown variant ", "unknown variant"),
    ];
    for (prefix, kind) in KINDS {
        if message.starts_with(prefix) {
            return match message.rfind(", expected ") {
                Some(at) => format!("{kind}{}", &message[at..]),
                None => kind.to_owned(),
            };
        }
    }
    message.to_owned()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Shape {
        secrets: Vec<String>,
        #[serde(default)]
        headers: BTreeMap<String, String>,
        #[serde(default)]
        mode: Option<Mode>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Fast,
    }

    #[test]
    fn a_type_error_names_the_field_and_what_was_expected_but_not_the_value() {
        let error = from_json_slice::<Shape>(br#"{"secrets": "whsec_TOPSECRETzzzz"}"#)
            .expect_err("a string is not a list");
        let text = error.to_string();
        assert!(!text.contains("TOPSECRET"), "{text}");
        assert_eq!(error.path, "secrets");
        assert_eq!(error.problem, "invalid type, expected a sequence");
        assert_eq!(error.at, Some((1, 33)));
        assert_eq!(
            text,
            "`secrets`: invalid type, expected a sequence (line 1, column 33)"
        );
    }

    #[test]
    fn nested_values_and_variants_are_left_out_too() {
        let error = from_json_slice::<Shape>(
            br#"{"secrets": [], "headers": {"Authorization": ["Bearer TOPSECRET"]}}"#,
        )
        .expect_err("a list is not a header value");
        assert_eq!(error.path, "headers.Authorization");
        assert!(!error.to_string().contains("TOPSECRET"), "{error}");
        let error = from_json_slice::<Shape>(br#"{"secrets": [], "mode": "TOPSECRET"}"#)
            .expect_err("no such variant");
        assert_eq!(error.path, "mode");
        assert_eq!(error.problem, "unknown variant, expected `fast`");
        // A value that imitates serde's wording cannot push itself into the message.
        let message = r#"invalid type: string "a, expected TOPSECRET", expected a sequence"#;
        assert_eq!(without_values(message), "invalid type, expected a sequence");
    }

    #[test]
    fn field_names_and_syntax_errors_are_kept() {
        let error = from_json_slice::<Shape>(b"{}").expect_err("missing");
        assert_eq!(error.problem, "missing field `secrets`");
        let error = from_json_slice::<Shape>(br#"{"secrets": ["#).expect_err("cut off");
        assert_eq!(error.problem, "EOF while parsing a list");
        assert_eq!(error.at, Some((1, 13)));
        let error = from_json_slice::<Shape>(br#"{"secrets": []} x"#).expect_err("trailing");
        assert_eq!(error.path, "");
        assert!(error.problem.starts_with("trailing characters"), "{error}");
    }
}
