//! Loading the `[outbox]` section: defaults, the file, `HOOKLINE_OUTBOX__*`, the flags.

use std::path::Path;

use anyhow::Context as _;
use figment::Figment;
use figment::providers::{Env, Format, Toml};
use hookline_core::secret::Secret;
use hookline_producer::outbox::OutboxConfig;

/// The outbox config: the file's `[outbox]` section, then `HOOKLINE_OUTBOX__*` variables,
/// then the flags given. Unknown keys and wrong types are refused with the key named.
pub fn load(
    file: Option<&Path>,
    postgres_url: Option<Secret>,
    schema: Option<String>,
) -> anyhow::Result<OutboxConfig> {
    let mut figment = Figment::new();
    if let Some(file) = file {
        if !file.exists() {
            anyhow::bail!("config file {} does not exist", file.display());
        }
        figment = Figment::from(Toml::file(file)).focus("outbox");
    }
    figment = figment.merge(Env::prefixed("HOOKLINE_OUTBOX__").split("__"));
    let mut config: OutboxConfig = figment
        .extract()
        .map_err(|error| anyhow::anyhow!(outbox_error(&error)))
        .context("loading the outbox configuration")?;
    if let Some(url) = postgres_url {
        config.postgres_url = Some(url);
    }
    if let Some(schema) = schema {
        config.schema = schema;
    }
    Ok(config)
}

/// A figment error with its key as `outbox.<key>`, never a value.
fn outbox_error(error: &figment::Error) -> String {
    let key = error.path.join(".");
    let kind = &error.kind;
    if key.is_empty() {
        format!("[outbox]: {kind}")
    } else {
        format!("outbox.{key}: {kind}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_section_and_unknown_keys() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("hookline.toml");
        std::fs::write(
            &path,
            "[kafka]\nbootstrap_servers = \"x:9092\"\n\n[outbox]\nbatch_size = 7\nschema = \"app\"\n",
        )
        .expect("write");
        let config =
            load(Some(&path), Some(Secret::new("postgres://u:p@h/d")), None).expect("loads");
        assert_eq!(config.batch_size, 7);
        assert_eq!(config.schema, "app");
        let flag = load(Some(&path), None, Some("other".into())).expect("loads");
        assert_eq!(flag.schema, "other");
        std::fs::write(&path, "[outbox]\nbatch_sise = 7\n").expect("write");
        let error = load(Some(&path), None, None).expect_err("unknown key");
        let text = format!("{error:#}");
        assert!(text.contains("batch_sise"), "{text}");
    }

    #[test]
    fn the_readme_example_is_a_valid_outbox_configuration() {
        let readme = include_str!("../../../../../README.md");
        let example = readme
            .split("```toml\n[outbox]\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("an [outbox] example in the README");
        // The example's URL is a file reference; the test has no such file.
        let example: String = example
            .lines()
            .filter(|line| !line.starts_with("postgres_url"))
            .map(|line| format!("{line}\n"))
            .collect();
        let config: OutboxConfig = Figment::from(Toml::string(&example))
            .extract()
            .expect("the README's keys are the outbox's");
        assert_eq!(
            config,
            OutboxConfig::default(),
            "the README shows the defaults"
        );
        let with_url = OutboxConfig {
            postgres_url: Some(Secret::new("postgres://u:p@h/d")),
            ..config
        };
        with_url.into_settings().expect("and they are valid");
    }
}
