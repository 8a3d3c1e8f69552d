//! The endpoint table: endpoint id -> its configuration and runtime state (concurrency
//! permits, circuit breaker), kept current from the compacted endpoints topic or a file,
//! with the subscription index of the tenants' endpoints kept current beside it, and how far
//! into the topic it has read (so the fan-out can wait for changes made before an event).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use hookline_core::endpoint::EndpointConfig;
use hookline_core::policy::RetryPolicy;
use hookline_core::signing::Signer;
use hookline_core::subscription::SubscriptionIndex;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Notify, Semaphore};

use hookline_core::breaker::{BreakerPolicy, CircuitBreaker};

use super::lifecycle::LifecycleState;
use crate::admission::Gate;
use crate::fast::FastMap;
use crate::http::{ClientFactory, endpoint_tls};
use crate::operator::{Operator, hooks};

/// Defaults applied to endpoints whose configuration leaves a field out.
#[derive(Clone, Debug)]
pub struct EndpointDefaults {
    /// Concurrent attempts per endpoint.
    pub max_concurrency: u32,
    /// The most concurrent attempts any one endpoint may have, whatever its configuration:
    /// its share of the dispatcher's attempts.
    pub max_concurrency_share: u32,
    /// The longest computed retry delay an endpoint may ask for (the largest tier).
    pub max_cap: Duration,
    /// Timeout of one attempt.
    pub timeout: Duration,
    /// The retry policy before the endpoint's override.
    pub retry: RetryPolicy,
    /// When an endpoint is slow (its standing: [`crate::admission`]).
    pub slow_after: Duration,
    /// The circuit breaker of each endpoint.
    pub breaker: BreakerPolicy,
    /// Builds the HTTP client of an endpoint with TLS material of its own.
    pub clients: ClientFactory,
}

/// An endpoint ready for deliveries. Its `Debug` shows no secret, no header value (custom
/// headers are credentials) and no query string.
pub struct Endpoint {
    /// Its id (the record key of the endpoints topic).
    pub id: String,
    /// Its configuration as stored.
    pub config: EndpointConfig,
    /// Its signing secrets and keys, parsed.
    pub signer: Signer,
    /// What signs deliveries to an event's own URL: its override secrets, never `signer`'s.
    pub override_signer: Signer,
    /// Extra request headers.
    pub headers: Vec<(String, String)>,
    /// Its retry policy, with the endpoint's override applied.
    pub retry: RetryPolicy,
    /// Timeout of one attempt.
    pub timeout: Duration,
    /// Permits for concurrent attempts.
    pub permits: Arc<Semaphore>,
    /// Its circuit breaker.
    pub breaker: Arc<Mutex<CircuitBreaker>>,
    /// Its rate limit, when it has one.
    pub limiter: Option<Arc<DefaultDirectRateLimiter>>,
    /// Its standing (fast, unproven or slow), adaptive limit and queue, kept across config
    /// changes that keep its concurrency cap.
    pub gate: Arc<Gate>,
    /// Its own HTTP client when it has a client certificate or a `server_ca`, built once
    /// per config version; `None`: the dispatcher's shared client.
    pub client: Option<crate::http::DeliveryClient>,
    /// Its failing-since clock: kept across config changes, reset when it is enabled again.
    pub lifecycle: Arc<Mutex<LifecycleState>>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Endpoint")
            .field("id", &self.id)
            .field("config", &self.config)
            .field("signer", &self.signer)
            .field("override_signer", &self.override_signer)
            .field("headers", &header_names)
            .field("retry", &self.retry)
            .field("timeout", &self.timeout)
            .field("permits", &self.permits)
            .field("breaker", &self.breaker)
            .field("limiter", &self.limiter.is_some())
            .field("gate", &self.gate)
            .field("own_client", &self.client.is_some())
            .field("lifecycle", &self.lifecycle)
            .finish()
    }
}

/// Why an endpoint configuration was not taken.
#[derive(Debug, thiserror::Error)]
#[error("endpoint {id}: {reason}")]
pub struct EndpointRejected {
    /// The endpoint id.
    pub id: String,
    /// What is wrong.
    pub reason: String,
}

/// The table every delivery looks its endpoint up in.
#[derive(Debug)]
pub struct EndpointTable {
    defaults: EndpointDefaults,
    endpoints: RwLock<FastMap<String, Arc<Endpoint>>>,
    subscriptions: RwLock<SubscriptionIndex>,
    /// Per partition of the endpoints topic, the offset after the last record applied.
    read_to: Mutex<BTreeMap<i32, i64>>,
    read_more: Notify,
    /// How many endpoints are disabled.
    disabled: Gauge,
    /// Told when an endpoint is disabled or enabled, once the table is loaded.
    operator: OnceLock<Operator>,
}

impl EndpointTable {
    /// An empty table.
    pub fn new(defaults: EndpointDefaults) -> Self {
        EndpointTable {
            defaults,
            endpoints: RwLock::new(FastMap::default()),
            subscriptions: RwLock::new(SubscriptionIndex::default()),
            read_to: Mutex::new(BTreeMap::new()),
            read_more: Notify::new(),
            disabled: Gauge::default(),
            operator: OnceLock::new(),
        }
    }

    /// From now on, sends `endpoint.disabled` / `endpoint.enabled` through `operator` when
    /// an endpoint's `enabled` flips (called once the table is loaded, so that history is
    /// no news).
    pub(crate) fn notify_flips_to(&self, operator: Operator) {
        let _ = self.operator.set(operator);
    }

    /// The same table, counting its disabled endpoints in `gauge`.
    pub fn count_disabled_in(mut self, gauge: Gauge) -> Self {
        self.disabled = gauge;
        self
    }

    /// The ids of the endpoints of `tenant` subscribed to `event_type` and `channels`, each
    /// once, sorted.
    pub fn subscribers(
        &self,
        tenant: &str,
        event_type: &str,
        channels: &[String],
    ) -> Vec<Arc<str>> {
        self.subscriptions
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .matches(tenant, event_type, channels)
    }

    /// Notes that the endpoints topic's `partition` was applied up to `offset` (exclusive).
    pub fn read_to(&self, partition: i32, offset: i64) {
        let mut read_to = self
            .read_to
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let at = read_to.entry(partition).or_insert(0);
        *at = (*at).max(offset);
        drop(read_to);
        self.read_more.notify_waiters();
    }

    /// Waits until every partition of the endpoints topic is applied up to its offset in
    /// `ends` (a partition at 0 holds nothing), or `timeout`; whether it got there.
    pub async fn wait_read_to(&self, ends: &BTreeMap<i32, i64>, timeout: Duration) -> bool {
        let reached = || {
            let read_to = self
                .read_to
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            ends.iter()
                .all(|(p, end)| *end <= 0 || read_to.get(p).is_some_and(|at| at >= end))
        };
        let give_up = tokio::time::Instant::now() + timeout;
        loop {
            let more = self.read_more.notified();
            if reached() {
                return true;
            }
            if tokio::time::timeout_at(give_up, more).await.is_err() {
                return reached();
            }
        }
    }

    /// The endpoint with this id, if known.
    pub fn get(&self, id: &str) -> Option<Arc<Endpoint>> {
        let endpoints = self
            .endpoints
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        endpoints.get(id).cloned()
    }

    /// How many endpoints are known.
    pub fn len(&self) -> usize {
        self.endpoints
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
    }

    /// Adds or replaces an endpoint. Runtime state survives a change that keeps its limits.
    pub fn upsert(&self, id: &str, config: EndpointConfig) -> Result<(), EndpointRejected> {
        let rejected = |reason: String| EndpointRejected {
            id: id.to_owned(),
            reason,
        };
        // Validating converts too: the parsed secrets and keys come with it.
        let parsed = config
            .to_endpoint()
            .map_err(|error| rejected(error.to_string()))?;
        let (signer, override_signer) = (parsed.signer(), parsed.override_signer());
        let client = self.client_for(id, &config).map_err(rejected)?;
        let mut retry = match &config.retry {
            Some(over) => self.defaults.retry.with_override(over),
            None => self.defaults.retry,
        };
        if retry.cap > self.defaults.max_cap {
            tracing::warn!(
                endpoint = id,
                cap_ms = retry.cap.as_millis(),
                "retry.cap_ms is above the largest retry tier; using the largest tier"
            );
            retry.cap = self.defaults.max_cap;
        }
        let asked = config
            .max_concurrency
            .unwrap_or(self.defaults.max_concurrency)
            .max(1);
        let max_concurrency = asked.min(self.defaults.max_concurrency_share.max(1));
        if max_concurrency < asked {
            tracing::warn!(
                endpoint = id,
                asked,
                max_concurrency,
                "max_concurrency is above one endpoint's share of concurrency.max_in_flight"
            );
        }
        let timeout = config
            .timeout_ms
            .map_or(self.defaults.timeout, Duration::from_millis);
        let headers = config
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();

        let mut endpoints = self
            .endpoints
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let gate = || {
            let cap = usize::try_from(max_concurrency).unwrap_or(usize::MAX);
            Arc::new(Gate::new(id, cap, self.defaults.slow_after))
        };
        let (permits, breaker, gate) = match endpoints.get(id) {
            Some(old) if old.config.max_concurrency == config.max_concurrency => (
                Arc::clone(&old.permits),
                Arc::clone(&old.breaker),
                Arc::clone(&old.gate),
            ),
            Some(old) => (semaphore(max_concurrency), Arc::clone(&old.breaker), gate()),
            None => (
                semaphore(max_concurrency),
                Arc::new(Mutex::new(CircuitBreaker::new(self.defaults.breaker))),
                gate(),
            ),
        };
        let limiter = match (endpoints.get(id), config.rate_limit_per_s) {
            (Some(old), Some(rate)) if old.config.rate_limit_per_s == Some(rate) => {
                old.limiter.clone()
            }
            (_, Some(rate)) => rate_limiter(rate),
            (_, None) => None,
        };
        // Enabling an endpoint again starts its clock afresh.
        let lifecycle = match endpoints.get(id) {
            Some(old) if old.config.enabled || !config.enabled => Arc::clone(&old.lifecycle),
            Some(_) | None => Arc::default(),
        };
        let was_disabled = endpoints.get(id).map(|old| !old.config.enabled);
        if let Some(operator) = self.operator.get() {
            hooks::table_changed(
                operator,
                id,
                endpoints.get(id).map(|old| &old.config),
                &config,
            );
        }
        let endpoint = Endpoint {
            id: id.to_owned(),
            config,
            signer,
            override_signer,
            headers,
            retry,
            timeout,
            permits,
            breaker,
            limiter,
            gate,
            client,
            lifecycle,
        };
        self.count_disabled(was_disabled, Some(!endpoint.config.enabled));
        let subscription = endpoint.config.subscription();
        endpoints.insert(id.to_owned(), Arc::new(endpoint));
        drop(endpoints);
        let mut subscriptions = self
            .subscriptions
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match subscription {
            Some(subscription) => subscriptions.upsert(id, &subscription),
            None => subscriptions.remove(id),
        }
        Ok(())
    }

    /// The client of an endpoint with TLS material of its own: the one it has when that
    /// material is unchanged, else a new one. A certificate or key that cannot be used is
    /// refused naming its field.
    fn client_for(
        &self,
        id: &str,
        config: &EndpointConfig,
    ) -> Result<Option<crate::http::DeliveryClient>, String> {
        let Some(tls) = endpoint_tls(config).map_err(|error| error.to_string())? else {
            return Ok(None);
        };
        if let Some(old) = self.get(id)
            && old.config.client_certificate == config.client_certificate
            && old.config.client_key == config.client_key
            && old.config.server_ca == config.server_ca
            && old.client.is_some()
        {
            return Ok(old.client.clone());
        }
        self.defaults
            .clients
            .build(Some(&tls))
            .map(Some)
            .map_err(|error| format!("its TLS client cannot be built: {error}"))
    }

    /// Keeps the disabled gauge current as one endpoint goes from `was` to `now`
    /// (`Some(true)`: disabled, `None`: absent).
    fn count_disabled(&self, was: Option<bool>, now: Option<bool>) {
        match (was == Some(true), now == Some(true)) {
            (false, true) => {
                self.disabled.inc();
            }
            (true, false) => {
                self.disabled.dec();
            }
            (true, true) | (false, false) => {}
        }
    }

    /// How many endpoints are disabled.
    #[cfg(test)]
    pub fn disabled_count(&self) -> i64 {
        self.disabled.get()
    }

    /// Removes an endpoint (a tombstone in the topic).
    pub fn remove(&self, id: &str) {
        let mut endpoints = self
            .endpoints
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let was_disabled = endpoints.remove(id).map(|old| !old.config.enabled);
        drop(endpoints);
        self.count_disabled(was_disabled, None);
        self.subscriptions
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(id);
    }
}

/// A limiter that lets `rate` deliveries start per second, one at a time (no bursts). The
/// endpoint's validation keeps `rate` at least `MIN_RATE_PER_S`, so the period always fits;
/// a period that still does not (a bug) is clamped to the longest one, never dropped.
fn rate_limiter(rate: f64) -> Option<Arc<DefaultDirectRateLimiter>> {
    let longest = Duration::from_secs_f64(1.0 / hookline_core::endpoint::MIN_RATE_PER_S);
    let period = Duration::try_from_secs_f64(1.0 / rate)
        .unwrap_or(longest)
        .clamp(Duration::from_nanos(1), longest);
    let quota = Quota::with_period(period)?;
    Some(Arc::new(RateLimiter::direct(quota)))
}

fn semaphore(permits: u32) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(
        usize::try_from(permits).unwrap_or(usize::MAX),
    ))
}

#[cfg(test)]
mod tests;
