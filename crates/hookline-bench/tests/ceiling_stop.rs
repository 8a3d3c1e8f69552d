//! The ceiling contestant stops cleanly on SIGTERM whenever it comes: the benchmark sends it
//! as soon as its sink has every request, which can be before the ceiling has read the last
//! response.

use std::io::Read as _;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

#[test]
fn a_sigterm_while_requests_are_in_flight_stops_it_cleanly() {
    // A receiver that takes the request and never answers: the ceiling is mid-request.
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("its address").port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookline-bench"))
        .args(["ceiling", "--url", &format!("http://127.0.0.1:{port}/hook")])
        .args([
            "--requests",
            "1",
            "--prefix",
            "t-ceiling-stop-",
            "--concurrency",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("hookline-bench runs");
    let (mut socket, _) = listener.accept().expect("the ceiling connects");
    // Its request has arrived: it is waiting for the answer.
    let mut first = [0_u8; 4];
    socket
        .read_exact(&mut first)
        .expect("the request's first bytes");
    assert_eq!(&first, b"POST");
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("a pid fits in pid_t"));
    kill(pid, Signal::SIGTERM).expect("SIGTERM is sent");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("its status") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "it did not stop within 10 s of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "it exited with {status}");
}
