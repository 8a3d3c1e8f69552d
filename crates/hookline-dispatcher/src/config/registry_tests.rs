//! The `[registry]` section: credentials (secrets read from references) and a CA file, and
//! refusals that name the field without showing a secret.

use super::*;

const PASSWORD: &str = "reg-pa55-4c1e90";

/// A temporary directory holding `files`, removed when dropped.
struct Dir(tempfile::TempDir);

impl Dir {
    fn new(files: &[(&str, &str)]) -> Dir {
        let dir = tempfile::tempdir().expect("temp dir");
        for (name, content) in files {
            std::fs::write(dir.path().join(name), content).expect("write");
        }
        Dir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
}

fn load(toml: &str) -> DispatcherConfig {
    Figment::from(Serialized::defaults(DispatcherConfig::default()))
        .merge(Toml::string(toml))
        .extract()
        .expect("the keys are the dispatcher's")
}

#[test]
fn credentials_come_from_references_and_are_never_shown() {
    let dir = Dir::new(&[("password", &format!("{PASSWORD}\n"))]);
    let config = load(&format!(
        "[registry]\nurl = \"https://registry.internal:8443/apis/ccompat/v7\"\n\
         username = \"hookline\"\npassword = \"${{file:{}}}\"\n",
        dir.path("password").display()
    ));
    assert_eq!(config.registry.username.as_deref(), Some("hookline"));
    assert_eq!(
        config.registry.password.as_ref().map(|p| p.expose()),
        Some(PASSWORD)
    );
    let settings = config.clone().into_settings().expect("valid settings");
    for shown in [format!("{config:?}"), format!("{settings:?}")] {
        assert!(!shown.contains(PASSWORD), "{shown}");
    }
}

#[test]
fn unusable_registry_settings_name_their_field_and_no_secret() {
    let cases = [
        (
            format!("[registry]\nurl = \"https://hookline:{PASSWORD}@registry.internal/\"\n"),
            "registry.url",
        ),
        (
            format!(
                "[registry]\nusername = \"hookline\"\npassword = \"{PASSWORD}\"\ntoken = \"{PASSWORD}\"\n"
            ),
            "registry.token",
        ),
        (
            "[registry]\nusername = \"hookline\"\n".to_owned(),
            "registry.password",
        ),
        (
            "[registry]\nca_file = \"/nonexistent/hookline/ca.pem\"\n".to_owned(),
            "registry.ca_file",
        ),
    ];
    for (toml, field) in cases {
        let error = load(&toml)
            .into_settings()
            .expect_err("refused")
            .to_string();
        assert!(error.contains(field), "{error}");
        assert!(!error.contains(PASSWORD), "{error}");
    }
}
