//! The outbound address guard at connection time: a DNS resolver that hands the client's
//! connector only the addresses the policy allows, so a name that later resolves to a
//! private address (DNS rebinding) still cannot be reached; and a pre-check that tells a
//! blocked URL apart from an unreachable one, so it goes to the DLQ with its own reason.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

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

/// Most URLs whose verdicts are kept; the least used go first.
const PRECHECK_CACHE_MAX: u64 = 4096;

/// Pre-check verdicts by URL for [`PRECHECK_TTL`]: each delivery used to parse its URL and,
/// for a host name, resolve it, though every delivery to an endpoint asks the same question.
/// Deliveries to a URL not checked yet wait for one check. The connection-time guard
/// ([`GuardedResolver`]) still checks every address actually connected to.
#[derive(Debug)]
pub struct PrecheckCache {
    policy: Arc<AddressPolicy>,
    verdicts: moka::future::Cache<String, Result<Url, GuardError>>,
}

impl PrecheckCache {
    /// An empty cache of verdicts under `policy`.
    pub fn new(policy: Arc<AddressPolicy>) -> Self {
        Self::with_ttl(policy, PRECHECK_TTL)
    }

    fn with_ttl(policy: Arc<AddressPolicy>, ttl: Duration) -> Self {
        PrecheckCache {
            policy,
            verdicts: moka::future::Cache::builder()
                .max_capacity(PRECHECK_CACHE_MAX)
                .time_to_live(ttl)
                .build(),
        }
    }

    /// [`precheck`] of `url`, or its verdict of less than [`PRECHECK_TTL`] ago: the URL
    /// parsed, as requests take it (a request given a `&str` would parse it again).
    pub async fn check(&self, url: &str) -> Result<Url, GuardError> {
        if let Some(verdict) = self.verdicts.get(url).await {
            return verdict;
        }
        // Boxed: it is rare, and a resolver's future would make every delivery task larger.
        let check = Box::pin(precheck(url, &self.policy));
        self.verdicts.get_with(url.to_owned(), check).await
    }
}

#[cfg(test)]
mod tests {
    use hookline_testkit::wait_until;

    use super::*;

    fn parsed(url: &str) -> Url {
        Url::parse(url).expect("a URL")
    }

    /// The default policy refuses loopback.
    fn refusing(ttl: Duration) -> PrecheckCache {
        PrecheckCache::with_ttl(Arc::new(AddressPolicy::default()), ttl)
    }

    #[tokio::test]
    async fn a_verdict_is_kept_for_its_time_then_asked_again() {
        let cache = refusing(Duration::from_millis(200));
        let url = "http://127.0.0.1:8080/hook";
        let refused = cache.check(url).await;
        assert!(
            matches!(refused, Err(GuardError::Blocked { .. })),
            "{refused:?}"
        );
        assert!(matches!(
            cache.verdicts.get(url).await,
            Some(Err(GuardError::Blocked { .. }))
        ));
        assert!(
            cache
                .verdicts
                .get("http://127.0.0.1:8081/hook")
                .await
                .is_none()
        );
        wait_until(Duration::from_secs(10), "the verdict expires", || async {
            cache.verdicts.get(url).await.is_none().then_some(())
        })
        .await;
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
        assert!(cache.verdicts.get(url).await.is_some());
    }

    #[tokio::test]
    async fn the_cache_keeps_at_most_its_bound() {
        let cache = refusing(PRECHECK_TTL);
        for port in 1..=PRECHECK_CACHE_MAX + 100 {
            let _verdict = cache.check(&format!("http://192.0.2.1:{port}/")).await;
        }
        cache.verdicts.run_pending_tasks().await;
        let kept = cache.verdicts.entry_count();
        assert!(kept <= PRECHECK_CACHE_MAX, "{kept} kept");
        // It evicts some, not all: what stays is still answered.
        assert!(kept > 0);
    }
}
