//! The registry's fault proxy: the dispatchers reach the registry through it, and it can
//! forward, refuse connections (down), or answer every request 503 or 504 itself (a load
//! balancer in front of a registry that is not there).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::gate::{Cut, Gate};
use crate::http;

/// What the proxy does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forward to the registry.
    Forward,
    /// Refuse connections.
    Refuse,
    /// Answer 503 and 504, in turn, without asking the registry.
    Unavailable,
}

/// The running proxy. Dropping it stops it.
pub struct FaultProxy {
    gate: Gate,
    mode: watch::Sender<ProxyMode>,
    /// Requests answered 503/504 by the proxy itself.
    answered: Arc<AtomicU64>,
}

impl FaultProxy {
    /// A proxy in front of the registry at `registry_url` (`http://host:port/...`).
    pub async fn start(registry_url: &str) -> anyhow::Result<FaultProxy> {
        let target = target_of(registry_url)?;
        let (mode, watch_mode) = watch::channel(ProxyMode::Forward);
        let answered = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&answered);
        let gate = Gate::start(move |stream, cut| {
            connection(stream, cut, target, watch_mode.clone(), Arc::clone(&count))
        })
        .await?;
        Ok(FaultProxy {
            gate,
            mode,
            answered,
        })
    }

    /// `registry_url` with its host and port replaced by the proxy's.
    pub fn url_for(&self, registry_url: &str) -> anyhow::Result<String> {
        let mut url = url::Url::parse(registry_url).context("the registry URL")?;
        url.set_ip_host(self.gate.addr().ip())
            .map_err(|()| anyhow::anyhow!("cannot set the proxy's host"))?;
        url.set_port(Some(self.gate.addr().port()))
            .map_err(|()| anyhow::anyhow!("cannot set the proxy's port"))?;
        Ok(url.as_str().trim_end_matches('/').to_owned())
    }

    /// Switches what it does; open connections are cut.
    pub fn set(&self, mode: ProxyMode) {
        match mode {
            ProxyMode::Refuse => self.gate.close(),
            ProxyMode::Forward | ProxyMode::Unavailable => self.gate.open(),
        }
        self.mode.send_replace(mode);
    }

    /// How many requests it answered 503/504 itself.
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }
}

fn target_of(registry_url: &str) -> anyhow::Result<SocketAddr> {
    let url = url::Url::parse(registry_url).context("the registry URL")?;
    let host = url.host_str().context("the registry URL has no host")?;
    let port = url
        .port_or_known_default()
        .context("the registry URL has no port")?;
    format!("{host}:{port}")
        .parse()
        .with_context(|| format!("the registry must be at an IP address, not {host}"))
}

async fn connection(
    mut inbound: TcpStream,
    mut cut: Cut,
    target: SocketAddr,
    mut mode: watch::Receiver<ProxyMode>,
    answered: Arc<AtomicU64>,
) {
    let now = *mode.borrow_and_update();
    match now {
        ProxyMode::Forward => {
            let Ok(mut outbound) = TcpStream::connect(target).await else {
                return;
            };
            // Until either side closes or the mode changes.
            tokio::select! {
                () = cut.closed() => {}
                _ = mode.changed() => {}
                _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
            }
        }
        ProxyMode::Unavailable => {
            let mut buf = Vec::new();
            let read = tokio::select! {
                () = cut.closed() => return,
                read = http::read_request(&mut inbound, &mut buf) => read,
            };
            if let Ok(Some(_)) = read {
                let n = answered.fetch_add(1, Ordering::Relaxed);
                let status = if n.is_multiple_of(2) { 503 } else { 504 };
                let _ = inbound.write_all(&http::response(status, true)).await;
                let _ = inbound.shutdown().await;
            }
        }
        ProxyMode::Refuse => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::Clock;
    use crate::receiver::{Endpoint, Tally, always};

    #[tokio::test]
    async fn forwards_refuses_and_answers_unavailable() {
        let secret = hookline_core::signing::SigningSecret::generate(&mut rand::rng()).to_whsec();
        let upstream = Endpoint::start(
            "up",
            secret,
            always(200),
            Clock::start(),
            Arc::new(Tally::default()),
        )
        .await
        .unwrap();
        let proxy = FaultProxy::start(&upstream.url()).await.unwrap();
        let url = proxy.url_for(&upstream.url()).unwrap();
        assert_ne!(url, upstream.url());
        assert!(url.ends_with("/hooks/up"), "{url}");
        // No pooling: switching the mode cuts kept-alive connections (as it should).
        let client = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let status = |client: reqwest::Client, url: String| async move {
            client
                .post(url)
                .body("x")
                .send()
                .await
                .map(|r| r.status().as_u16())
        };
        assert_eq!(status(client.clone(), url.clone()).await.unwrap(), 200);
        proxy.set(ProxyMode::Unavailable);
        assert_eq!(status(client.clone(), url.clone()).await.unwrap(), 503);
        assert_eq!(status(client.clone(), url.clone()).await.unwrap(), 504);
        assert_eq!(proxy.answered(), 2);
        proxy.set(ProxyMode::Refuse);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(status(client.clone(), url.clone()).await.is_err());
        proxy.set(ProxyMode::Forward);
        let mut answer = None;
        for _ in 0..50 {
            if let Ok(code) = status(client.clone(), url.clone()).await {
                answer = Some(code);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(answer, Some(200));
    }
}
