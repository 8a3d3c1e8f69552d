//! The machine and the versions a run was measured with.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

pub use hookline_testkit::Machine;

/// What was measured, with what.
#[derive(Clone, Debug, Serialize)]
pub struct Versions {
    /// `hookline --version` of the binary measured.
    pub hookline: String,
    /// This benchmark's version.
    pub bench: String,
    /// librdkafka, which both contestants use.
    pub librdkafka: String,
    /// `rustc --version`, when a compiler is on the PATH.
    pub rustc: Option<String>,
    /// The free-form `--label` (stack versions, revision).
    pub label: String,
}

impl Versions {
    /// The versions of `hookline`, this benchmark, librdkafka and rustc.
    pub fn detect(hookline: &Path, label: &str) -> anyhow::Result<Self> {
        let hookline = command_line(Command::new(hookline).arg("--version"))
            .ok_or_else(|| anyhow::anyhow!("`{} --version` did not answer", hookline.display()))?;
        Ok(Versions {
            hookline,
            bench: env!("CARGO_PKG_VERSION").to_owned(),
            librdkafka: rdkafka::util::get_rdkafka_version().1,
            rustc: command_line(Command::new("rustc").arg("--version")),
            label: label.to_owned(),
        })
    }
}

/// The first line a command prints, when it succeeds.
fn command_line(command: &mut Command) -> Option<String> {
    let output = command.output().ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8(output.stdout)
        .ok()?
        .lines()
        .next()
        .map(|line| line.trim().to_owned())
}
