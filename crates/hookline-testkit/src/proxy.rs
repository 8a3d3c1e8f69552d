//! A TCP proxy on 127.0.0.1:0 that can be switched off, to take a dependency (the registry)
//! away from a component under test and give it back.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The proxy. Dropping it stops it.
pub struct Proxy {
    addr: SocketAddr,
    up: watch::Sender<bool>,
    stop: CancellationToken,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Proxy {
    /// Forwards connections to `target` while up; while down, closes them at once.
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("bound address");
        let (up, switch) = watch::channel(true);
        let stop = CancellationToken::new();
        let until = stop.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = until.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((mut inbound, _)) = accepted else {
                    continue;
                };
                if !*switch.borrow() {
                    drop(inbound);
                    continue;
                }
                let (mut switch, until) = (switch.clone(), until.clone());
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        () = until.cancelled() => {}
                        _ = switch.wait_for(|up| !*up) => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    }
                });
            }
        });
        Proxy { addr, up, stop }
    }

    /// Where to connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Refuses new connections and cuts the open ones.
    pub fn set_down(&self) {
        self.up.send_replace(false);
    }

    /// Forwards again.
    pub fn set_up(&self) {
        self.up.send_replace(true);
    }
}
