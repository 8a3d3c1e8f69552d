//! The outbound address guard at connection time: a DNS resolver that hands the client's
//! connector only the addresses the policy allows, so a name that later resolves to a
//! private address (DNS rebinding) still cannot be reached; and a pre-check that tells a
//! blocked URL apart from an unreachable one, so it goes to the DLQ with its own reason.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hookline_core::url_guard::{AddressPolicy, TargetHost, check_ip, check_port, check_url};
use hyper_util::client::legacy::connect::dns::Name;
use reqwest::Url;

/// Why a URL may not be called.
#[derive(Clone, Debug, thiserror::Error)]
pub enum GuardError {
    /// The URL is not an http(s) URL hookline may call.
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    /// Every address of the host is refused by the policy.
    #[error("{host} resolves only to refused addresses ({detail})")]
    Blocked {
        /// The host name or address.
        host: String,
        /// Which rule refused it.
        detail: String,
    },
}

/// A resolver that drops refused addresses.
#[derive(Clone, Debug)]
pub struct GuardedResolver {
    policy: Arc<AddressPolicy>,
}

impl GuardedResolver {
    /// A resolver enforcing `policy`.
    pub fn new(policy: Arc<AddressPolicy>) -> Self {
        GuardedResolver { policy }
    }
}

/// The addresses a name resolved to that the policy allows.
pub type Addrs = std::vec::IntoIter<SocketAddr>;

/// A resolution under way.
pub type Resolving = Pin<Box<dyn Future<Output = Result<Addrs, std::io::Error>> + Send>>;

/// hyper-util's connector resolves through any service from a [`Name`] to addresses.
impl tower_service::Service<Name> for GuardedResolver {
    type Response = Addrs;
    type Error = std::io::Error;
    type Future = Resolving;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Resolving {
        let policy = Arc::clone(&self.policy);
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let resolved = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let allowed: Vec<SocketAddr> = resolved
                .filter(|addr| check_ip(addr.ip(), &policy).is_ok())
                .collect();
            if allowed.is_empty() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("{host}: every address is refused by the outbound address policy"),
                ));
            }
            Ok(allowed.into_iter())
        })
    }
}

/// The longest the pre-check waits for DNS.
pub const PRECHECK_DNS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Checks a URL before an attempt: its parsed form when at least one of its addresses is
/// allowed (or the name does not resolve right now, which is a retryable connection failure,
/// not a refusal).
async fn precheck(url: &str, policy: &AddressPolicy) -> Result<Url, GuardError> {
    let target = check_url(url).map_err(|error| GuardError::InvalidUrl(error.to_string()))?;
    check_port(target.port, policy).map_err(|blocked| GuardError::Blocked {
        host: target.url.host_str().unwrap_or_default().to_owned(),
        detail: blocked.to_string(),
    })?;
    let domain = match &target.host {
        TargetHost::Ip(ip) => {
            return match check_ip(*ip, policy) {
                Ok(()) => Ok(target.url),
                Err(blocked) => Err(GuardError::Blocked {
                    host: ip.to_string(),
                    detail: blocked.to_string(),
                }),
            };
        }
        TargetHost::Domain(domain) => domain.clone(),
    };
    // A resolver that does not answer in time is a connection problem for the attempt to
    // meet (retryable), not a refusal; and it must not hold the delivery for ever.
    let lookup = tokio::net::lookup_host((domain.as_str(), target.port));
    let Ok(Ok(resolved)) = tokio::time::timeout(PRECHECK_DNS_TIMEOUT, lookup).await else {
        return Ok(target.url);
    };
    let mut last_refusal = None;
    for addr in resolved {
        match check_ip(addr.ip(), policy) {
            Ok(()) => return Ok(target.url),
            Err(blocked) => last_refusal = Some(blocked.to_string()),
        }
    }
    match last_refusal {
        Some(detail) => Err(GuardError::Blocked {
            host: domain,
            detail,
        }),
        None => Ok(target.url),
    }
}

/// How long a pre-check verdict stands: a host's addresses may change, so a name is
/// resolved again after this; an address literal gets the same verdict again.
pub const PRECHECK_TTL: Duration = Duration::from_secs(10);

/// Most URLs whose verdicts are kept; past this many the cache starts over.
const PRECHECK_CACHE_MAX: usize = 4096;

/// A pre-check's answer and when it was given.
type Verdict = (Instant, Result<Url, GuardError>);

/// Pre-check verdicts by URL for [`PRECHECK_TTL`]: each delivery used to parse its URL and,
/// for a host name, resolve it on the blocking pool, though every delivery to an endpoint
/// asks the same question. The connection-time guard ([`GuardedResolver`]) still checks
/// every address actually connected to.
#[derive(Debug)]
pub struct PrecheckCache {
    policy: Arc<AddressPolicy>,
    verdicts: Mutex<HashMap<String, Verdict>>,
}

impl PrecheckCache {
    /// An empty cache of verdicts under `policy`.
    pub fn new(policy: Arc<AddressPolicy>) -> Self {
        PrecheckCache {
            policy,
            verdicts: Mutex::new(HashMap::new()),
        }
    }

    /// [`precheck`] of `url`, or its verdict of less than [`PRECHECK_TTL`] ago: the URL
    /// parsed, as requests take it (a request given a `&str` would parse it again).
    pub async fn check(&self, url: &str) -> Result<Url, GuardError> {
        if let Some(verdict) = self.cached(url, Instant::now()) {
            return verdict;
        }
        // Boxed: it is rare, and a resolver's future would make every delivery task larger.
        let verdict = Box::pin(precheck(url, &self.policy)).await;
        self.keep(url, verdict.clone(), Instant::now());
        verdict
    }

    fn cached(&self, url: &str, now: Instant) -> Option<Result<Url, GuardError>> {
        let verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
        let (at, verdict) = verdicts.get(url)?;
        (now.saturating_duration_since(*at) < PRECHECK_TTL).then(|| verdict.clone())
    }

    fn keep(&self, url: &str, verdict: Result<Url, GuardError>, now: Instant) {
        let mut verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
        if verdicts.len() >= PRECHECK_CACHE_MAX && !verdicts.contains_key(url) {
            verdicts.clear();
        }
        verdicts.insert(url.to_owned(), (now, verdict));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> Url {
        Url::parse(url).expect("a URL")
    }

    fn cache() -> PrecheckCache {
        // The default policy refuses loopback.
        PrecheckCache::new(Arc::new(AddressPolicy::default()))
    }

    #[tokio::test]
    async fn a_verdict_is_kept_for_its_time_then_asked_again() {
        let cache = cache();
        let url = "http://127.0.0.1:8080/hook";
        let refused = cache.check(url).await;
        assert!(
            matches!(refused, Err(GuardError::Blocked { .. })),
            "{refused:?}"
        );
        let now = Instant::now();
        assert!(matches!(
            cache.cached(url, now),
            Some(Err(GuardError::Blocked { .. }))
        ));
        assert!(cache.cached(url, now + PRECHECK_TTL).is_none());
        assert!(cache.cached("http://127.0.0.1:8081/hook", now).is_none());
    }

    #[tokio::test]
    async fn an_allowed_url_comes_back_parsed_and_again_from_the_cache() {
        let cache = PrecheckCache::new(Arc::new(AddressPolicy {
            allow_loopback: true,
            ..AddressPolicy::default()
        }));
        let url = "http://127.0.0.1:8080/hook?x=1";
        let first = cache.check(url).await.expect("allowed");
        assert_eq!(first, parsed(url));
        assert_eq!(cache.check(url).await.expect("kept"), first);
        assert!(cache.cached(url, Instant::now()).is_some());
    }

    #[tokio::test]
    async fn the_cache_starts_over_when_full() {
        let cache = cache();
        let now = Instant::now();
        for port in 0..PRECHECK_CACHE_MAX {
            let url = format!("http://192.0.2.1:{port}/");
            cache.keep(&url, Ok(parsed(&url)), now);
        }
        cache.keep("http://192.0.2.2/", Ok(parsed("http://192.0.2.2/")), now);
        let kept = cache.verdicts.lock().expect("lock").len();
        assert_eq!(kept, 1);
        assert!(cache.cached("http://192.0.2.2/", now).is_some());
    }
}
