//! The machine a run was made on, for the reports of the benchmark and the chaos suite.

use serde::Serialize;

/// Where a run was made.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPUs this process may use (`nproc`).
    pub nproc: usize,
    /// The CPU model (`/proc/cpuinfo`).
    pub cpu: String,
    /// Memory, in GiB.
    pub memory_gib: f64,
    /// The kernel release.
    pub kernel: String,
}

impl Machine {
    /// This machine.
    pub fn detect() -> Self {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
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
