//! The outbound address guard at connection time: a DNS resolver that hands reqwest only the
//! addresses the policy allows, so a name that later resolves to a private address (DNS
//! rebinding) still cannot be reached; and a pre-check that tells a blocked URL apart from
//! an unreachable one, so it goes to the DLQ with its own reason.

use std::net::SocketAddr;
use std::sync::Arc;

use hookline_core::url_guard::{AddressPolicy, TargetHost, check_ip, check_port, check_url};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why a URL may not be called.
#[derive(Debug, thiserror::Error)]
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

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = Arc::clone(&self.policy);
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let resolved = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let allowed: Vec<SocketAddr> = resolved
                .filter(|addr| check_ip(addr.ip(), &policy).is_ok())
                .collect();
            if allowed.is_empty() {
                let refused: Box<dyn std::error::Error + Send + Sync> =
                    format!("{host}: every address is refused by the outbound address policy")
                        .into();
                return Err(refused);
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

/// The longest the pre-check waits for DNS.
pub const PRECHECK_DNS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Checks a URL before an attempt: `Ok` when at least one of its addresses is allowed (or the
/// name does not resolve right now, which is a retryable connection failure, not a refusal).
pub async fn precheck(url: &str, policy: &AddressPolicy) -> Result<(), GuardError> {
    let target = check_url(url).map_err(|error| GuardError::InvalidUrl(error.to_string()))?;
    check_port(target.port, policy).map_err(|blocked| GuardError::Blocked {
        host: target.url.host_str().unwrap_or_default().to_owned(),
        detail: blocked.to_string(),
    })?;
    let domain = match &target.host {
        TargetHost::Ip(ip) => {
            return check_ip(*ip, policy).map_err(|blocked| GuardError::Blocked {
                host: ip.to_string(),
                detail: blocked.to_string(),
            });
        }
        TargetHost::Domain(domain) => domain.clone(),
    };
    // A resolver that does not answer in time is a connection problem for the attempt to
    // meet (retryable), not a refusal; and it must not hold the delivery for ever.
    let lookup = tokio::net::lookup_host((domain.as_str(), target.port));
    let Ok(Ok(resolved)) = tokio::time::timeout(PRECHECK_DNS_TIMEOUT, lookup).await else {
        return Ok(());
    };
    let mut last_refusal = None;
    for addr in resolved {
        match check_ip(addr.ip(), policy) {
            Ok(()) => return Ok(()),
            Err(blocked) => last_refusal = Some(blocked.to_string()),
        }
    }
    match last_refusal {
        Some(detail) => Err(GuardError::Blocked {
            host: domain,
            detail,
        }),
        None => Ok(()),
    }
}
