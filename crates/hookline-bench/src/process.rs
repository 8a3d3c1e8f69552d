//! A contestant's process: started with its log in a file, sampled from `/proc` (peak RSS,
//! CPU time), stopped with SIGTERM.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, SysconfVar, sysconf};
use tokio::process::{Child, Command};

/// What `/proc` says about a process.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Peak resident set size (VmHWM), in KiB.
    pub peak_rss_kib: u64,
    /// User plus system CPU time, in seconds.
    pub cpu_s: f64,
}

/// A running contestant, killed if dropped before it stopped.
pub struct Contestant {
    child: Child,
    pid: u32,
    log: PathBuf,
}

impl Contestant {
    /// Starts `command` with stdout and stderr appended to `log`.
    pub fn spawn(mut command: Command, log: &Path) -> anyhow::Result<Self> {
        let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone().context("duplicating the log file")?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {:?}", command.as_std().get_program()))?;
        let pid = child.id().context("the new process has no id")?;
        Ok(Contestant {
            child,
            pid,
            log: log.to_owned(),
        })
    }

    /// Waits until the process exits by itself.
    pub async fn exited(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Reads its peak RSS and CPU time.
    pub fn sample(&self) -> anyhow::Result<Sample> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .context("reading /proc/<pid>/status")?;
        Ok(Sample {
            peak_rss_kib: parse_vm_hwm(&status).context("no VmHWM in /proc/<pid>/status")?,
            cpu_s: cpu_s_of(self.pid).context("reading /proc/<pid>/stat")?,
        })
    }

    /// Sends SIGTERM and waits up to `grace` for it to exit; kills it after that.
    pub async fn terminate(mut self, grace: Duration) -> anyhow::Result<ExitStatus> {
        let pid = Pid::from_raw(i32::try_from(self.pid).context("the process id")?);
        kill(pid, Signal::SIGTERM).with_context(|| format!("kill -TERM {} failed", self.pid))?;
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => status.context("waiting for the process"),
            Err(_) => {
                self.child.kill().await.context("killing the process")?;
                bail!("it did not stop within {grace:?} of SIGTERM");
            }
        }
    }

    /// The last lines of its log, for an error message.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log)
    }
}

/// The last lines of a log file.
pub fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(15)..].join("\n");
    if tail.is_empty() {
        format!("(nothing in {})", log.display())
    } else {
        format!("last lines of {}:\n{tail}", log.display())
    }
}

/// VmHWM from `/proc/<pid>/status`, in KiB.
fn parse_vm_hwm(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// utime + stime from `/proc/<pid>/stat`, in clock ticks.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces and parentheses: count from its end.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// User plus system CPU time of process `pid` so far, in seconds.
pub fn cpu_s_of(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(parse_cpu_ticks(&stat)? as f64 / clock_ticks_per_s() as f64)
}

/// `sysconf(_SC_CLK_TCK)`, the unit of `/proc/<pid>/stat`'s times; 100 if it has none.
fn clock_ticks_per_s() -> u64 {
    sysconf(SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|ticks| u64::try_from(ticks).ok())
        .filter(|ticks| *ticks > 0)
        .unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_fields() {
        let status =
            "Name:\thookline\nVmPeak:\t  200000 kB\nVmHWM:\t   51234 kB\nVmRSS:\t 40000 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(51_234));
        let stat =
            "4242 (tokio (rt) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 37 0 0 20 0 4 0 100 0 0";
        assert_eq!(parse_cpu_ticks(stat), Some(287));
        assert_eq!(parse_cpu_ticks("4242 (x) S 1"), None);
    }

    #[test]
    fn samples_this_process() {
        let me = std::process::id();
        let status = std::fs::read_to_string(format!("/proc/{me}/status")).expect("status");
        let stat = std::fs::read_to_string(format!("/proc/{me}/stat")).expect("stat");
        assert!(parse_vm_hwm(&status).is_some_and(|kib| kib > 0));
        assert!(parse_cpu_ticks(&stat).is_some());
    }

    #[test]
    fn the_kernel_tells_its_clock_ticks() {
        // USER_HZ, 100 on every Linux architecture hookline builds for.
        assert_eq!(sysconf(SysconfVar::CLK_TCK), Ok(Some(100)));
        assert_eq!(clock_ticks_per_s(), 100);
    }
}
