//! The machine and the versions a run was measured with.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// Where the benchmark ran.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPUs this process may use (`nproc`).
    pub nproc: usize,
    /// The CPU model.
    pub cpu: String,
    /// Memory, in GiB.
    pub memory_gib: f64,
    /// The kernel release.
    pub kernel: String,
}

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

impl Machine {
    /// This machine.
    pub fn detect() -> Self {
        let cpuinfo = read("/proc/cpuinfo");
        let meminfo = read("/proc/meminfo");
        Machine {
            nproc: std::thread::available_parallelism().map_or(1, usize::from),
            cpu: cpuinfo
                .lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map_or_else(
                    || "unknown".to_owned(),
                    |(_, model)| model.trim().to_owned(),
                ),
            memory_gib: meminfo
                .lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<f64>()
                        .ok()
                })
                .map_or(0.0, |kib| kib / (1024.0 * 1024.0)),
            kernel: format!("Linux {}", read("/proc/sys/kernel/osrelease").trim()),
        }
    }
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

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
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
