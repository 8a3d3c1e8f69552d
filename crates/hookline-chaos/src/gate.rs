//! A loopback listener that can refuse connections and take them again: closing it drops
//! the socket (a connect is refused, as with a process that is down) and cuts the
//! connections it let in; opening it binds the same port anew.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The switch a connection watches: it must end when the gate closes.
#[derive(Clone)]
pub struct Cut(watch::Receiver<bool>);

impl Cut {
    /// Resolves when the gate closes (at once if it is closed).
    pub async fn closed(&mut self) {
        // An error means the gate was dropped: closed too.
        let _ = self.0.wait_for(|open| !*open).await;
    }
}

/// The listener. Dropping it stops accepting.
pub struct Gate {
    addr: SocketAddr,
    open: watch::Sender<bool>,
    stop: CancellationToken,
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Gate {
    /// Listens on a free loopback port and hands each connection to `serve`.
    pub async fn start<F, Fut>(serve: F) -> anyhow::Result<Gate>
    where
        F: Fn(TcpStream, Cut) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding a loopback port")?;
        let addr = listener.local_addr().context("the bound address")?;
        let (open, switch) = watch::channel(true);
        let stop = CancellationToken::new();
        tokio::spawn(accept_loop(listener, addr, switch, stop.clone(), serve));
        Ok(Gate { addr, open, stop })
    }

    /// Where to connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Refuses connections from now on and cuts the open ones.
    pub fn close(&self) {
        self.open.send_replace(false);
    }

    /// Accepts connections again.
    pub fn open(&self) {
        self.open.send_replace(true);
    }
}

async fn accept_loop<F, Fut>(
    first: TcpListener,
    addr: SocketAddr,
    mut switch: watch::Receiver<bool>,
    stop: CancellationToken,
    serve: F,
) where
    F: Fn(TcpStream, Cut) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let for_cuts = switch.clone();
    let mut listener = Some(first);
    loop {
        let current = match listener.take() {
            Some(listener) => listener,
            None => match rebind(addr, &stop).await {
                Some(listener) => listener,
                None => return,
            },
        };
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = switch.wait_for(|open| !*open) => break,
                accepted = current.accept() => {
                    if let Ok((stream, _)) = accepted {
                        let _ = stream.set_nodelay(true);
                        tokio::spawn(serve(stream, Cut(for_cuts.clone())));
                    }
                }
            }
        }
        drop(current);
        tokio::select! {
            () = stop.cancelled() => return,
            _ = switch.wait_for(|open| *open) => {}
        }
    }
}

/// Binds `addr` again; the port was ours a moment ago, so this only waits out a race.
async fn rebind(addr: SocketAddr, stop: &CancellationToken) -> Option<TcpListener> {
    let mut last: Option<io::Error> = None;
    for _ in 0..200 {
        match TcpListener::bind(addr).await {
            Ok(listener) => return Some(listener),
            Err(error) => last = Some(error),
        }
        tokio::select! {
            () = stop.cancelled() => return None,
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
    tracing::error!(%addr, error = ?last, "could not listen on the port again");
    None
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    #[tokio::test]
    async fn refuses_while_closed_and_cuts_open_connections() {
        let gate = Gate::start(|mut stream: TcpStream, mut cut: Cut| async move {
            let _ = stream.write_all(b"hi").await;
            cut.closed().await;
        })
        .await
        .unwrap();
        let mut open = TcpStream::connect(gate.addr()).await.unwrap();
        let mut hello = [0u8; 2];
        open.read_exact(&mut hello).await.unwrap();
        gate.close();
        // The open connection is cut...
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), open.read_to_end(&mut rest)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
        // ...and new ones are refused, until it opens again on the same port.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let refused = TcpStream::connect(gate.addr()).await;
        assert_eq!(
            refused.map(|_| ()).map_err(|e| e.kind()),
            Err(io::ErrorKind::ConnectionRefused)
        );
        gate.open();
        let mut again = None;
        for _ in 0..50 {
            if let Ok(stream) = TcpStream::connect(gate.addr()).await {
                again = Some(stream);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut again = again.expect("listening again");
        again.read_exact(&mut hello).await.unwrap();
        assert_eq!(&hello, b"hi");
    }
}
