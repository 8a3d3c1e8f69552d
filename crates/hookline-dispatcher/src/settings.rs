//! The dispatcher's validated runtime settings: [`DispatcherConfig`] converted once, every
//! field checked (naming the field at fault), durations and policies built.

mod attempts;
mod cancellations;
mod check;
mod fanout;
mod ledger;
mod lifecycle;
mod operator;
mod outbound;
mod telemetry;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use hookline_core::breaker::BreakerPolicy;
use hookline_core::classify::ClassifyConfig;
use hookline_core::policy::{PolicyError, RetryPolicy, RetryTiers, parse_suffix};
use hookline_core::url_guard::AddressPolicy;
use hookline_kafka::{Compatibility, KafkaSettings, RegistrySettings};
use hyper::header::HeaderValue;
use tokio::sync::Semaphore;

use crate::config::{BreakerConfig, DispatcherConfig, GroupProtocol};
use crate::error::{DispatchError, Result};
use check::{at_most, non_empty, positive};

pub use attempts::AttemptsSettings;
pub use cancellations::CancellationsSettings;
pub use fanout::FanoutSettings;
pub use ledger::{LedgerSettings, PgSettings, RedisSettings};
pub use lifecycle::LifecycleSettings;
pub use operator::OperatorWebhooksSettings;
pub use telemetry::TelemetrySettings;

impl DispatcherConfig {
    /// Validates every field and converts durations and policies, naming the field at fault.
    pub fn into_settings(self) -> Result<Settings> {
        let retry = self
            .retry
            .to_policy_at("retry")
            .map_err(|error| match error {
                PolicyError::Invalid { field, reason } => DispatchError::config(&field, reason),
                other => DispatchError::config("retry", other.to_string()),
            })?;
        let classify = self
            .status
            .to_classify_config("status")
            .map_err(|error| DispatchError::config(&error.field, error.reason))?;
        if self.topics.retry_tiers.is_empty() {
            return Err(DispatchError::config(
                "topics.retry_tiers",
                "at least one tier is needed",
            ));
        }
        let delays = self
            .topics
            .retry_tiers
            .iter()
            .map(|suffix| parse_suffix(suffix))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|error| DispatchError::config("topics.retry_tiers", error.to_string()))?;
        let tiers = RetryTiers::new(delays)
            .map_err(|error| DispatchError::config("topics.retry_tiers", error.to_string()))?;
        let largest = tiers
            .tiers()
            .last()
            .map_or(Duration::ZERO, |tier| tier.delay);
        if retry.cap > largest {
            return Err(DispatchError::config(
                "retry.cap_ms",
                format!(
                    "{} ms is above the largest retry tier ({} ms): lower it or add a tier",
                    retry.cap.as_millis(),
                    largest.as_millis()
                ),
            ));
        }
        non_empty("topics.events", &self.topics.events)?;
        non_empty("group_id", &self.group_id)?;
        if let Some(id) = &self.group_instance_id {
            non_empty("group_instance_id", id)?;
        }
        if let Some(ms) = self.session_timeout_ms {
            positive("session_timeout_ms", ms)?;
        }
        if self.group_protocol == GroupProtocol::Consumer {
            // librdkafka refuses these with the consumer protocol: say which setting to use.
            for (property, instead) in [
                ("session.timeout.ms", "session_timeout_ms"),
                (
                    "heartbeat.interval.ms",
                    "the broker's group.consumer.heartbeat.interval.ms",
                ),
                (
                    "partition.assignment.strategy",
                    "group_protocol = \"classic\"",
                ),
                ("group.protocol", "group_protocol"),
                ("group.instance.id", "group_instance_id"),
            ] {
                if self.kafka.properties.contains_key(property) {
                    return Err(DispatchError::config(
                        &format!("kafka.properties.{property}"),
                        format!("is not used with group_protocol = \"consumer\"; use {instead}"),
                    ));
                }
            }
        }
        non_empty("kafka.bootstrap_servers", &self.kafka.bootstrap_servers)?;
        // Properties hookline's guarantees depend on, references that do not resolve,
        // and what librdkafka refuses, named before any client is made.
        self.kafka.validate().map_err(|error| {
            DispatchError::config(
                &format!("kafka.properties.{}", error.property()),
                error.reason(),
            )
        })?;
        // The URL (without credentials), the credentials and the CA file; the error names
        // the field and never a secret.
        self.registry
            .validate()
            .map_err(|error| DispatchError::Registry(error.into()))?;
        positive("http.timeout_ms", self.http.timeout_ms)?;
        positive(
            "concurrency.max_in_flight",
            self.concurrency.max_in_flight as u64,
        )?;
        positive(
            "concurrency.max_pending",
            self.concurrency.max_pending as u64,
        )?;
        // Each sizes a semaphore, which panics past its maximum.
        at_most(
            "concurrency.max_in_flight",
            self.concurrency.max_in_flight,
            Semaphore::MAX_PERMITS,
        )?;
        at_most(
            "concurrency.max_pending",
            self.concurrency.max_pending,
            Semaphore::MAX_PERMITS,
        )?;
        positive(
            "concurrency.per_endpoint",
            u64::from(self.concurrency.per_endpoint),
        )?;
        positive("http.max_payload_bytes", self.http.max_payload_bytes as u64)?;
        let max_message_bytes = self.kafka.max_message_bytes().map_err(|reason| {
            DispatchError::config("kafka.properties.message.max.bytes", reason)
        })?;
        let room = max_message_bytes.saturating_sub(PAYLOAD_HEADROOM);
        if self.http.max_payload_bytes > room {
            return Err(DispatchError::config(
                "http.max_payload_bytes",
                format!(
                    "must be at most the producer's message.max.bytes ({max_message_bytes}) \
                     less {PAYLOAD_HEADROOM}, i.e. {room}, so that retry copies and DLQ \
                     envelopes of a deliverable event can be written"
                ),
            ));
        }
        if self.concurrency.queue_wait_ms.is_some() {
            return Err(DispatchError::config(
                "concurrency.queue_wait_ms",
                "was replaced by concurrency.slow_after_ms (records no longer wait for a \
                 place: a slow endpoint's records go to the slow lane at once); set that \
                 instead, or remove the key",
            ));
        }
        positive("concurrency.slow_after_ms", self.concurrency.slow_after_ms)?;
        if self.concurrency.per_endpoint_queue > self.concurrency.max_pending / 2 {
            return Err(DispatchError::config(
                "concurrency.per_endpoint_queue",
                "must be at most half of concurrency.max_pending, so that one endpoint \
                 cannot take every record in flight",
            ));
        }
        positive(
            "concurrency.max_uncommitted_per_partition",
            self.concurrency.max_uncommitted_per_partition,
        )?;
        positive("concurrency.max_hold_ms", self.concurrency.max_hold_ms)?;
        let breaker = self.breaker.to_policy()?;
        let admin_listen = if self.admin.listen.is_empty() {
            None
        } else {
            Some(self.admin.listen.parse::<SocketAddr>().map_err(|error| {
                DispatchError::config("admin.listen", format!("{:?}: {error}", self.admin.listen))
            })?)
        };
        let dlq_topic = self
            .topics
            .dlq
            .clone()
            .unwrap_or_else(|| format!("{}.dlq", self.topics.events));
        let address_policy = self.outbound.to_policy()?;
        let user_agent = HeaderValue::try_from(self.http.user_agent.as_str()).map_err(|_| {
            DispatchError::config("http.user_agent", "is not a valid HTTP header value")
        })?;
        let ca_roots = match &self.http.ca_file {
            Some(path) => {
                let pem = std::fs::read(path).map_err(|error| {
                    DispatchError::config("http.ca_file", format!("{}: {error}", path.display()))
                })?;
                crate::http::Roots(crate::http::certificates("http.ca_file", &pem).map_err(
                    |error| {
                        DispatchError::config(
                            "http.ca_file",
                            format!("{}: {}", path.display(), error.reason),
                        )
                    },
                )?)
            }
            None => crate::http::Roots::default(),
        };
        let dispatcher_id = self
            .dispatcher_id
            .clone()
            .unwrap_or_else(default_dispatcher_id);
        let ledger = self.ledger.to_settings()?;
        let instance = self.group_instance_id.as_deref().unwrap_or(&dispatcher_id);
        let fanout = self
            .fanout
            .to_settings(&self.topics.events, &self.group_id, instance)?;
        let telemetry = self.telemetry.to_settings()?;
        let attempts = self.attempts.to_settings(&self.topics.events)?;
        let cancellations = self.cancellations.to_settings(&self.topics.events)?;
        let operator_webhooks = self.operator_webhooks.to_settings()?;
        Ok(Settings {
            cancellations,
            operator_webhooks,
            telemetry,
            attempts,
            lifecycle: self.lifecycle.to_settings(),
            fanout,
            endpoints_topic: (!self.topics.endpoints.is_empty())
                .then(|| self.topics.endpoints.clone()),
            lane_topic: format!("{}.lane", self.topics.events),
            events_topic: self.topics.events,
            dlq_topic,
            endpoints_file: self.endpoints_file,
            kafka: self.kafka,
            registry: self.registry,
            group_id: self.group_id,
            group_protocol: self.group_protocol,
            group_instance_id: self.group_instance_id,
            session_timeout: self.session_timeout_ms.map(Duration::from_millis),
            dispatcher_id,
            tiers,
            retry,
            classify,
            address_policy,
            ca_roots,
            timeout: Duration::from_millis(self.http.timeout_ms),
            max_payload_bytes: self.http.max_payload_bytes,
            max_response_bytes: self.http.max_response_bytes,
            user_agent,
            max_in_flight: self.concurrency.max_in_flight,
            max_pending: self.concurrency.max_pending,
            per_endpoint_concurrency: self.concurrency.per_endpoint,
            per_endpoint_queue: self.concurrency.per_endpoint_queue,
            slow_after: Duration::from_millis(self.concurrency.slow_after_ms),
            max_uncommitted: i64::try_from(self.concurrency.max_uncommitted_per_partition)
                .unwrap_or(i64::MAX),
            max_hold: Duration::from_millis(self.concurrency.max_hold_ms),
            max_message_bytes,
            breaker,
            admin_listen,
            shutdown_grace: Duration::from_millis(self.shutdown_grace_ms),
            dlq_compatibility: self.dlq_compatibility,
            ledger,
        })
    }
}

/// The dispatcher consumer's `fetch.wait.max.ms` unless the user sets it: how late a retry
/// may be fetched past its due time, at the cost of that many idle fetches a second.
const FETCH_WAIT_MAX_MS: &str = "100";

/// The dispatcher consumer's prefetch unless the user sets it: at most 4 MiB in its queue,
/// over all its partitions (librdkafka's default is 64 MiB), fetched again 10 ms after it
/// was full (the default waits a second).
const PREFETCH: [(&str, &str); 2] = [
    ("queued.max.messages.kbytes", "4096"),
    ("fetch.queue.backoff.ms", "10"),
];

/// Room kept between the producer's limit and the largest payload, for the event's other
/// fields and the headers of a retry copy or a DLQ envelope.
const PAYLOAD_HEADROOM: usize = 64 * 1024;

impl BreakerConfig {
    fn to_policy(&self) -> Result<BreakerPolicy> {
        if !(1..=100).contains(&self.failure_rate_percent) {
            return Err(DispatchError::config(
                "breaker.failure_rate_percent",
                "must be 1 to 100",
            ));
        }
        positive("breaker.window_ms", self.window_ms)?;
        positive("breaker.open_ms", self.open_ms)?;
        positive("breaker.half_open_probes", u64::from(self.half_open_probes))?;
        Ok(BreakerPolicy {
            failure_rate_percent: self.failure_rate_percent,
            minimum_requests: self.minimum_requests,
            window: Duration::from_millis(self.window_ms),
            open_for: Duration::from_millis(self.open_ms),
            half_open_probes: self.half_open_probes,
        })
    }
}

impl Settings {
    /// The dispatcher's consumer: hookline's group consumer settings, then the protocol's.
    pub(crate) fn consumer_config(&self) -> rdkafka::ClientConfig {
        let mut config = self.kafka.consumer_config(&self.group_id);
        config.set("group.protocol", self.group_protocol.as_str());
        // The fan-out writes deliveries in transactions: only committed ones are delivered.
        config.set("isolation.level", "read_committed");
        // A retry tier's partition resumes when its head record falls due, but librdkafka
        // sends the next fetch only when the broker has answered the one in flight, which it
        // holds up to `fetch.wait.max.ms` while no other partition has data: with the default
        // 500 ms, retries were up to half a second late (the benchmark's retry scenario).
        if !self.kafka.properties.contains_key("fetch.wait.max.ms") {
            config.set("fetch.wait.max.ms", FETCH_WAIT_MAX_MS);
        }
        // librdkafka prefetches up to 64 MiB by default (the consumer's one queue, whatever
        // the partitions), and once that is full fetches again only a second later. A
        // smaller prefetch, topped up at once, delivers a backlog as fast with less memory:
        // 4 MiB is a third of a second of slow-2000's 20,000 records a second (`hookline-bench
        // all --only slow`: 173 MiB against 196-200 with 16 MiB, and 222-248 with 16 MiB
        // before mimalloc's huge pages were turned off; 257-264 with librdkafka's defaults).
        for (key, value) in PREFETCH {
            if !self.kafka.properties.contains_key(key) {
                config.set(key, value);
            }
        }
        match self.group_protocol {
            // The broker's default assignor (uniform) balances the number of partitions
            // per member over all subscribed topics together: one replica could hold every
            // partition of the events topic and the others only retry tiers (the chaos
            // suite saw 6/0/0), so that one did all first deliveries and its crash stalled
            // them all. Range balances each topic on its own.
            GroupProtocol::Consumer => {
                if !self.kafka.properties.contains_key("group.remote.assignor") {
                    config.set("group.remote.assignor", "range");
                }
            }
            GroupProtocol::Classic => {
                if !self
                    .kafka
                    .properties
                    .contains_key("partition.assignment.strategy")
                {
                    config.set("partition.assignment.strategy", "cooperative-sticky");
                }
                if let Some(timeout) = self.session_timeout {
                    config.set("session.timeout.ms", timeout.as_millis().to_string());
                }
            }
        }
        if let Some(id) = &self.group_instance_id {
            config.set("group.instance.id", id);
        }
        config
    }

    /// The shortest tier's delay: where a record put off for a moment goes.
    pub fn first_tier_delay(&self) -> Duration {
        self.tiers
            .tiers()
            .first()
            .map_or(Duration::from_secs(1), |tier| tier.delay)
    }
}

fn default_dispatcher_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "dispatcher".to_owned());
    format!("{host}-{}", std::process::id())
}

/// Validated runtime settings of a dispatcher.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Trace export, when configured.
    pub telemetry: Option<TelemetrySettings>,
    /// The attempt log.
    pub attempts: AttemptsSettings,
    /// The fan-out stage.
    pub fanout: FanoutSettings,
    /// Kafka connection.
    pub kafka: KafkaSettings,
    /// Registry connection.
    pub registry: RegistrySettings,
    /// Consumer group.
    pub group_id: String,
    /// Its protocol.
    pub group_protocol: GroupProtocol,
    /// Static membership name.
    pub group_instance_id: Option<String>,
    /// How long a silent member keeps its partitions (`None`: the broker's default).
    pub session_timeout: Option<Duration>,
    /// This replica's name.
    pub dispatcher_id: String,
    /// The main topic.
    pub events_topic: String,
    /// The DLQ topic.
    pub dlq_topic: String,
    /// The slow lane: `<events>.lane`, where a slow endpoint's records wait their turn,
    /// keyed by endpoint.
    pub lane_topic: String,
    /// The endpoints topic, if used.
    pub endpoints_topic: Option<String>,
    /// The endpoints file, if used.
    pub endpoints_file: Option<PathBuf>,
    /// The retry tiers.
    pub tiers: RetryTiers,
    /// The default retry policy.
    pub retry: RetryPolicy,
    /// Status classification.
    pub classify: ClassifyConfig,
    /// Outbound address policy.
    pub address_policy: AddressPolicy,
    /// Roots trusted besides the system's (`http.ca_file`).
    pub ca_roots: crate::http::Roots,
    /// Default attempt timeout.
    pub timeout: Duration,
    /// Largest payload delivered.
    pub max_payload_bytes: usize,
    /// Most response bytes read.
    pub max_response_bytes: usize,
    /// The User-Agent, checked as a header value when the config is read.
    pub user_agent: HeaderValue,
    /// Global attempt concurrency.
    pub max_in_flight: usize,
    /// Unfinished records at most.
    pub max_pending: usize,
    /// Default per-endpoint concurrency.
    pub per_endpoint_concurrency: u32,
    /// Per-endpoint queue places.
    pub per_endpoint_queue: usize,
    /// When an endpoint is slow.
    pub slow_after: Duration,
    /// Most records between a partition's committed offset and the newest taken.
    pub max_uncommitted: i64,
    /// How long a record may hold its partition's commit position.
    pub max_hold: Duration,
    /// The producer's `message.max.bytes`.
    pub max_message_bytes: usize,
    /// Each endpoint's circuit breaker.
    pub breaker: BreakerPolicy,
    /// Admin address.
    pub admin_listen: Option<SocketAddr>,
    /// Shutdown and rebalance drain deadline.
    pub shutdown_grace: Duration,
    /// DLQ subject compatibility.
    pub dlq_compatibility: Compatibility,
    /// The delivery ledger, when configured.
    pub ledger: Option<LedgerSettings>,
    /// When endpoints are disabled by the dispatcher itself.
    pub lifecycle: LifecycleSettings,
    /// Cancellations.
    pub cancellations: CancellationsSettings,
    /// The operational webhooks, when an operator endpoint is configured.
    pub operator_webhooks: Option<OperatorWebhooksSettings>,
}
