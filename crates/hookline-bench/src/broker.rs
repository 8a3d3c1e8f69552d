//! The broker's CPU time, when it runs on this machine: a dispatcher's choices cost the
//! broker too (every produce request it sends, every fetch), and on the benchmark's machine
//! that CPU is taken from the contestants. The broker is the process listening on the
//! bootstrap port; a remote broker, or one this user may not inspect, is not measured.

use std::path::Path;

use crate::process::cpu_s_of;

/// A broker process on this machine.
#[derive(Clone, Copy, Debug)]
pub struct Broker {
    pid: u32,
}

impl Broker {
    /// The process listening on the port of the first of `bootstrap`'s addresses, if it is
    /// on this machine and its CPU time can be read.
    pub fn find(bootstrap: &str) -> Option<Broker> {
        let port = bootstrap_port(bootstrap)?;
        let inodes = listening_inodes(port);
        let pid = owner_of(&inodes)?;
        let broker = Broker { pid };
        broker.cpu_s().map(|_| broker)
    }

    /// Its user plus system CPU time so far, in seconds.
    pub fn cpu_s(self) -> Option<f64> {
        cpu_s_of(self.pid)
    }
}

/// The port of the first `host:port` of a bootstrap list.
fn bootstrap_port(bootstrap: &str) -> Option<u16> {
    let first = bootstrap.split(',').next()?.trim();
    let first = first.rsplit_once("://").map_or(first, |(_, rest)| rest);
    first.rsplit_once(':')?.1.parse().ok()
}

/// The socket inodes listening on `port`, from `/proc/net/tcp` and `/proc/net/tcp6`.
fn listening_inodes(port: u16) -> Vec<u64> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| listeners(&text, port))
        .collect()
}

/// The inodes of the rows of a `/proc/net/tcp` table that listen (state `0A`) on `port`.
fn listeners(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields.get(1)?.rsplit_once(':')?.1;
            let listening = *fields.get(3)? == "0A";
            (listening && u16::from_str_radix(local_port, 16).ok()? == port)
                .then(|| fields.get(9)?.parse().ok())
                .flatten()
        })
        .collect()
}

/// The process holding one of the sockets `inodes`.
fn owner_of(inodes: &[u64]) -> Option<u32> {
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            holds(&entry.path().join("fd"), &wanted).then_some(pid)
        })
}

fn holds(fds: &Path, wanted: &[String]) -> bool {
    let Ok(entries) = std::fs::read_dir(fds) else {
        return false;
    };
    entries.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .ok()
            .and_then(|target| target.to_str().map(|t| wanted.iter().any(|w| w == t)))
            .unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_the_first_addresses() {
        assert_eq!(bootstrap_port("127.0.0.1:9092"), Some(9092));
        assert_eq!(bootstrap_port("a:9093, b:9094"), Some(9093));
        assert_eq!(bootstrap_port("PLAINTEXT://[::1]:9095"), Some(9095));
        assert_eq!(bootstrap_port("localhost"), None);
    }

    #[test]
    fn only_listening_rows_of_the_port_count() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:2384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0 100 0 0 10 0
   1: 0100007F:2384 0100007F:D0F2 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0 20 4 30 10 -1
   2: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4444 1 0 100 0 0 10 0
";
        assert_eq!(listeners(table, 9092), vec![4242]);
        assert_eq!(listeners(table, 8080), vec![4444]);
        assert!(listeners(table, 9093).is_empty());
    }

    /// Against the local stack's broker (`HOOKLINE_TEST_BOOTSTRAP`), as `deploy/test` runs
    /// it: the process measured is the Kafka broker, and its CPU time can be read.
    #[test]
    fn the_stacks_broker_is_the_process_measured() {
        let bootstrap = hookline_testkit::kafka_settings().bootstrap_servers;
        let broker = Broker::find(&bootstrap).expect("the local broker listens on this machine");
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", broker.pid)).expect("cmdline");
        let cmdline = String::from_utf8_lossy(&cmdline);
        assert!(cmdline.contains("kafka.Kafka"), "{cmdline}");
        assert!(broker.cpu_s().is_some_and(|s| s > 0.0));
    }

    #[test]
    fn a_listener_of_this_process_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding");
        let port = listener.local_addr().expect("its address").port();
        let broker = Broker::find(&format!("127.0.0.1:{port}")).expect("this process");
        assert_eq!(broker.pid, std::process::id());
        assert!(broker.cpu_s().is_some_and(|s| s >= 0.0));
    }
}
