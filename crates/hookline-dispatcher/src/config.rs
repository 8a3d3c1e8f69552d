//! The dispatcher's configuration: the user-facing contract (serde, every field documented,
//! units in names, unknown fields refused), loaded in layers (defaults, a TOML file,
//! `HOOKLINE_*` environment variables) and converted once into validated [`Settings`].

use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use hookline_core::classify::StatusConfig;
use hookline_core::policy::{RetryConfig, RetryTiers};
use hookline_kafka::{Compatibility, KafkaSettings, RegistrySettings};
use serde::{Deserialize, Serialize};

pub use attempts::AttemptsConfig;
pub use cancellations::CancellationsConfig;
pub use fanout::FanoutConfig;
pub use ledger::LedgerConfig;
pub use lifecycle::LifecycleConfig;
pub use operator::{NoticeType, OperatorWebhooksConfig};
pub use outbound::OutboundConfig;
pub use telemetry::TelemetryConfig;

use crate::error::{DispatchError, Result};

/// The dispatcher configuration file (TOML). Every field has a default.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DispatcherConfig {
    /// How to reach Kafka (`bootstrap_servers`, extra librdkafka `properties`).
    pub kafka: KafkaSettings,
    /// How to reach the schema registry: `url` of the Confluent-compatible API, `timeout_ms`,
    /// `username` + `password` (basic) or `token` (bearer), `ca_file` (extra root
    /// certificates, PEM). `password` and `token` take `${env:NAME}`/`${file:PATH}`.
    pub registry: RegistrySettings,
    /// Topic names and retry tiers.
    pub topics: TopicsConfig,
    /// Consumer group shared by all dispatcher replicas.
    pub group_id: String,
    /// The consumer group protocol: `consumer` (KIP-848, Kafka 4.x brokers: assignments are
    /// incremental, and members keep their partitions while others join, leave or die; the
    /// broker's `range` assignor, so that each topic is spread over the replicas, unless
    /// `kafka.properties` sets `group.remote.assignor`) or `classic` (for older brokers,
    /// with the cooperative-sticky assignor).
    pub group_protocol: GroupProtocol,
    /// A stable member name for static membership (`group.instance.id`), e.g. a
    /// StatefulSet's pod name: a member restarted under the same name within the session
    /// timeout gets its partitions back without moving them. Unique per replica.
    pub group_instance_id: Option<String>,
    /// How long a member that stops heartbeating (a crash, `kill -9`) keeps its partitions
    /// before they move to the others, in milliseconds; unset: the broker's default (45 s).
    /// With `classic` it is the client's session timeout; with `consumer` it is set on the
    /// group (`consumer.session.timeout.ms`) at start-up, within the broker's
    /// `group.consumer.min/max.session.timeout.ms`.
    pub session_timeout_ms: Option<u64>,
    /// This replica's name in DLQ envelopes and logs; default `<hostname>-<pid>`.
    pub dispatcher_id: Option<String>,
    /// The default retry policy (endpoints may override it).
    pub retry: RetryConfig,
    /// Which HTTP statuses are retried.
    pub status: StatusConfig,
    /// Outbound HTTP.
    pub http: HttpConfig,
    /// Concurrency limits.
    pub concurrency: ConcurrencyConfig,
    /// The per-endpoint circuit breaker.
    pub breaker: BreakerConfig,
    /// Which outbound addresses are allowed besides public ones.
    pub outbound: OutboundConfig,
    /// The admin port: `/healthz`, `/readyz`, `/metrics`.
    pub admin: AdminConfig,
    /// A static endpoints file (TOML or JSON) instead of, or besides, the endpoints topic.
    pub endpoints_file: Option<PathBuf>,
    /// How long shutdown (and a rebalance) waits for running deliveries, in milliseconds.
    pub shutdown_grace_ms: u64,
    /// Compatibility level set on the DLQ's registry subject.
    pub dlq_compatibility: Compatibility,
    /// The optional delivery ledger (Redis, PostgreSQL or both) that suppresses second
    /// deliveries.
    pub ledger: LedgerConfig,
    /// The fan-out of tenant events into deliveries.
    pub fanout: FanoutConfig,
    /// Trace export with OTLP: `otlp_endpoint` (off when unset), `service_name`,
    /// `sample_ratio`, `headers` for the collector (secrets, references allowed).
    pub telemetry: TelemetryConfig,
    /// The attempt log (`<events>.attempts`).
    pub attempts: AttemptsConfig,
    /// When an endpoint is disabled by the dispatcher itself.
    pub lifecycle: LifecycleConfig,
    /// Cancellations (`hookline events cancel`, `<events>.cancellations`).
    pub cancellations: CancellationsConfig,
    /// hookline's own webhooks to an operator endpoint (off unless `endpoint_id` is set).
    pub operator_webhooks: OperatorWebhooksConfig,
}

/// A consumer group protocol.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum GroupProtocol {
    /// KIP-848's consumer protocol.
    #[default]
    Consumer,
    /// The classic protocol, with cooperative-sticky assignments.
    Classic,
}

impl GroupProtocol {
    /// The librdkafka `group.protocol` value.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupProtocol::Consumer => "consumer",
            GroupProtocol::Classic => "classic",
        }
    }
}

/// Topic names and retry tiers.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TopicsConfig {
    /// The main topic applications publish to.
    pub events: String,
    /// The dead-letter topic; default `<events>.dlq`.
    pub dlq: Option<String>,
    /// The compacted endpoints topic; empty to use only `endpoints_file`.
    pub endpoints: String,
    /// Retry tier delays as topic suffixes (`200ms`, `5s`, `1m`, `10m`, `1h`); each tier is
    /// the topic `<events>.retry.<suffix>`.
    pub retry_tiers: Vec<String>,
}

/// Outbound HTTP.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Timeout of one attempt, in milliseconds (endpoints may override it).
    pub timeout_ms: u64,
    /// Largest payload delivered, in bytes; a larger event goes to the DLQ. At most the
    /// producer's `message.max.bytes` (librdkafka's default 1000000) less 64 KiB, so that
    /// every retry copy and DLQ envelope of a deliverable event can be written.
    pub max_payload_bytes: usize,
    /// Most response bytes read; the rest is dropped.
    pub max_response_bytes: usize,
    /// The User-Agent header.
    pub user_agent: String,
    /// A PEM file of CA certificates trusted besides the system roots for every endpoint
    /// (a private PKI; endpoints may add their own with `server_ca`). Default none.
    pub ca_file: Option<PathBuf>,
}

/// Concurrency limits.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConcurrencyConfig {
    /// HTTP attempts running at once over all endpoints.
    pub max_in_flight: usize,
    /// Records taken from Kafka and not finished yet (backpressure on consumption).
    pub max_pending: usize,
    /// Attempts running at once per endpoint (endpoints may override it), at most a quarter
    /// of `max_in_flight` (one endpoint's share; start-up warns when it is more).
    pub per_endpoint: u32,
    /// Records of one fast endpoint held at once (waiting for or running its attempts):
    /// its share of `max_pending`. While it is full, the partition of its next record
    /// pauses; a slow endpoint holds only what it runs (see `slow_after_ms`).
    pub per_endpoint_queue: usize,
    /// When an endpoint is slow, in milliseconds: its attempts take longer than this, or
    /// none of those running ends for this long (or they fail, or its circuit is open). A
    /// slow endpoint's records draw on a budget all slow endpoints share (half of
    /// `max_in_flight`, in fair shares); one that finds no room goes to the slow lane
    /// (`<events>.lane`) at once, without an attempt, and waits there for its turn.
    pub slow_after_ms: u64,
    /// Replaced by `slow_after_ms`; refused with a message naming it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_wait_ms: Option<u64>,
    /// Most records between a partition's committed offset and the newest record taken
    /// from it: past it the partition pauses until the commit moves on. A crash or a
    /// rebalance re-delivers at most this many records per partition.
    pub max_uncommitted_per_partition: u64,
    /// How long one record may hold its partition's commit position, in milliseconds,
    /// before it is moved to a tier (a record of a strict-ordering endpoint is not moved).
    pub max_hold_ms: u64,
}

/// The per-endpoint circuit breaker: it opens when the share of failed attempts (timeouts,
/// connection errors, 408, 429, 5xx) over a sliding window reaches a rate, sends the
/// endpoint's records to a tier while open (no attempt spent), then admits a few probes whose
/// failure rate closes or reopens it. An endpoint that fails half its requests keeps flowing.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    /// Percentage of failed attempts over the window that opens it, 1 to 100.
    pub failure_rate_percent: u8,
    /// Attempts the window must hold before it may open; 0 disables the breaker.
    pub minimum_requests: u32,
    /// Length of the sliding window, in milliseconds.
    pub window_ms: u64,
    /// How long it stays open before probes, in milliseconds.
    pub open_ms: u64,
    /// Probes admitted when half-open, at least 1.
    pub half_open_probes: u32,
}

/// The admin port.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// `host:port` to serve on; empty to disable.
    pub listen: String,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        DispatcherConfig {
            kafka: KafkaSettings::default(),
            registry: RegistrySettings::default(),
            topics: TopicsConfig::default(),
            group_id: "hookline-dispatcher".to_owned(),
            group_protocol: GroupProtocol::default(),
            group_instance_id: None,
            session_timeout_ms: None,
            dispatcher_id: None,
            retry: RetryConfig::default(),
            status: StatusConfig::default(),
            http: HttpConfig::default(),
            concurrency: ConcurrencyConfig::default(),
            breaker: BreakerConfig::default(),
            outbound: OutboundConfig::default(),
            admin: AdminConfig::default(),
            endpoints_file: None,
            shutdown_grace_ms: 15_000,
            dlq_compatibility: Compatibility::Backward,
            ledger: LedgerConfig::default(),
            fanout: FanoutConfig::default(),
            telemetry: TelemetryConfig::default(),
            attempts: AttemptsConfig::default(),
            lifecycle: LifecycleConfig::default(),
            cancellations: CancellationsConfig::default(),
            operator_webhooks: OperatorWebhooksConfig::default(),
        }
    }
}

impl Default for TopicsConfig {
    fn default() -> Self {
        TopicsConfig {
            events: "webhook-events".to_owned(),
            dlq: None,
            endpoints: "webhook-endpoints".to_owned(),
            retry_tiers: RetryTiers::DEFAULT_SUFFIXES.map(str::to_owned).to_vec(),
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            timeout_ms: 10_000,
            max_payload_bytes: 900_000,
            max_response_bytes: 64 * 1024,
            user_agent: format!("hookline/{}", env!("CARGO_PKG_VERSION")),
            ca_file: None,
        }
    }
}

impl Default for ConcurrencyConfig {
    fn default() -> Self {
        ConcurrencyConfig {
            max_in_flight: 256,
            max_pending: 2048,
            per_endpoint: 16,
            per_endpoint_queue: 256,
            slow_after_ms: 1_000,
            queue_wait_ms: None,
            max_uncommitted_per_partition: 5_000,
            max_hold_ms: 60_000,
        }
    }
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failure_rate_percent: 80,
            minimum_requests: 20,
            window_ms: 30_000,
            open_ms: 30_000,
            half_open_probes: 3,
        }
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: "127.0.0.1:9464".to_owned(),
        }
    }
}

impl DispatcherConfig {
    /// Loads the defaults, then `file` (TOML) when given, then `HOOKLINE_*` variables
    /// (`HOOKLINE_KAFKA__BOOTSTRAP_SERVERS`, `HOOKLINE_RETRY__BASE_MS`: `__` separates
    /// levels). Unknown keys and wrong types are refused with the key's path.
    pub fn load(file: Option<&Path>) -> Result<Self> {
        let mut figment = Figment::from(Serialized::defaults(DispatcherConfig::default()));
        if let Some(file) = file {
            if !file.exists() {
                return Err(DispatchError::config(
                    "config file",
                    format!("{} does not exist", file.display()),
                ));
            }
            figment = figment.merge(Toml::file(file));
        }
        // Only `HOOKLINE_*` variables under a top-level key (a field of this struct, as serde
        // reads it) are config; others, such as `HOOKLINE_BOOTSTRAP_SERVERS` of the command
        // line or `HOOKLINE_HOME` of the local stack, belong to other tools. Below a key,
        // unknown names are refused.
        let top_level_keys = serde_aux::serde_introspection::serde_introspect::<Self>();
        let env = Env::prefixed("HOOKLINE_").split("__").filter(|key| {
            let top = key.as_str().split('.').next().unwrap_or_default();
            top_level_keys
                .iter()
                .any(|known| known.eq_ignore_ascii_case(top))
        });
        figment = figment.merge(env);
        figment
            .extract()
            .map_err(|error| DispatchError::ConfigSource(Box::new(error)))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Every field of the struct is a top-level key the environment may set, the last one
    /// added as well as the first; variables of other tools under `HOOKLINE_` are not config.
    #[test]
    // figment's `Jail` takes a closure returning its own (large) error type.
    #[allow(clippy::result_large_err)]
    fn environment_variables_reach_every_top_level_key_and_no_other() {
        let keys = serde_aux::serde_introspection::serde_introspect::<DispatcherConfig>();
        let serialized = serde_json::to_value(DispatcherConfig::default()).expect("serializes");
        let mut fields: Vec<&str> = serialized
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut known = keys.to_vec();
        fields.sort_unstable();
        known.sort_unstable();
        assert_eq!(known, fields);

        figment::Jail::expect_with(|jail| {
            jail.set_env("HOOKLINE_SHUTDOWN_GRACE_MS", "1234");
            jail.set_env("HOOKLINE_OPERATOR_WEBHOOKS__MAX_PER_MINUTE", "7");
            jail.set_env("HOOKLINE_KAFKA__BOOTSTRAP_SERVERS", "broker:9092");
            jail.set_env("HOOKLINE_HOME", "/var/lib/hookline");
            jail.set_env("HOOKLINE_BOOTSTRAP_SERVERS", "elsewhere:9092");
            let config = DispatcherConfig::load(None).expect("loads");
            assert_eq!(config.shutdown_grace_ms, 1234);
            assert_eq!(config.operator_webhooks.max_per_minute, 7);
            assert_eq!(config.kafka.bootstrap_servers, "broker:9092");
            Ok(())
        });
    }

    #[test]
    fn the_readme_example_is_a_valid_configuration() {
        let readme = include_str!("../../../README.md");
        let example = readme
            .split("```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("a TOML example in the README");
        let config: DispatcherConfig =
            Figment::from(Serialized::defaults(DispatcherConfig::default()))
                .merge(Toml::string(example))
                .extract()
                .expect("the README's keys are the dispatcher's");
        let settings = config.into_settings().expect("and its values are valid");
        assert_eq!(settings.tiers.tiers().len(), 4);
    }

    #[test]
    fn defaults_convert() {
        let settings = DispatcherConfig::default()
            .into_settings()
            .expect("defaults are valid");
        assert_eq!(settings.dlq_topic, "webhook-events.dlq");
        assert_eq!(settings.tiers.tiers().len(), 4);
        assert_eq!(
            settings.endpoints_topic.as_deref(),
            Some("webhook-endpoints")
        );
    }

    #[test]
    fn bad_values_name_their_field() {
        let mut config = DispatcherConfig::default();
        config.topics.retry_tiers = vec!["5 seconds".to_owned()];
        let error = config.into_settings().expect_err("bad tier").to_string();
        assert!(error.contains("topics.retry_tiers"), "{error}");

        let mut config = DispatcherConfig::default();
        config.retry.base_ms = 0;
        let error = config.into_settings().expect_err("bad base").to_string();
        assert!(error.contains("retry.base_ms"), "{error}");

        let mut config = DispatcherConfig::default();
        config.topics.retry_tiers = vec!["5s".to_owned(), "1m".to_owned()];
        let error = config
            .into_settings()
            .expect_err("cap above tiers")
            .to_string();
        assert!(error.contains("retry.cap_ms"), "{error}");

        let mut config = DispatcherConfig::default();
        config.http.max_payload_bytes = 1024 * 1024;
        let error = config
            .into_settings()
            .expect_err("over the producer")
            .to_string();
        assert!(error.contains("http.max_payload_bytes"), "{error}");

        let mut config = DispatcherConfig::default();
        config.concurrency.per_endpoint_queue = config.concurrency.max_pending;
        let error = config
            .into_settings()
            .expect_err("one endpoint")
            .to_string();
        assert!(error.contains("concurrency.per_endpoint_queue"), "{error}");

        let mut config = DispatcherConfig::default();
        config.http.user_agent = "hookline\nInjected: yes".to_owned();
        let error = config
            .into_settings()
            .expect_err("not a header value")
            .to_string();
        assert!(error.contains("http.user_agent"), "{error}");
        assert!(!error.contains("Injected"), "{error}");

        let mut config = DispatcherConfig::default();
        config.breaker.failure_rate_percent = 0;
        let error = config.into_settings().expect_err("no rate").to_string();
        assert!(error.contains("breaker.failure_rate_percent"), "{error}");

        let mut config = DispatcherConfig::default();
        config
            .kafka
            .properties
            .insert("session.timeout.ms".to_owned(), "6000".to_owned());
        let error = config
            .into_settings()
            .expect_err("not with KIP-848")
            .to_string();
        assert!(
            error.contains("kafka.properties.session.timeout.ms"),
            "{error}"
        );
        assert!(
            error.contains("session_timeout_ms"),
            "names what to use: {error}"
        );

        let mut config = DispatcherConfig::default();
        config.admin.listen = "nowhere".to_owned();
        let error = config.into_settings().expect_err("bad listen").to_string();
        assert!(error.contains("admin.listen"), "{error}");

        let mut config = DispatcherConfig::default();
        config.ledger.redis_url = Some("http://:hunter2@cache:6379".to_owned());
        let error = config.into_settings().expect_err("bad URL").to_string();
        assert!(error.contains("ledger.redis_url"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");

        let mut config = DispatcherConfig::default();
        config.ledger.redis_url = Some("redis://127.0.0.1:6379".to_owned());
        config.ledger.ttl_s = 0;
        let error = config.into_settings().expect_err("no TTL").to_string();
        assert!(error.contains("ledger.ttl_s"), "{error}");
    }

    /// Found by `fuzz::every_key_alone_with_every_edge_value`: these were accepted, and
    /// start-up panicked sizing a semaphore with them.
    #[test]
    fn counts_too_large_for_a_semaphore_are_refused_with_their_name() {
        for key in ["max_pending", "max_in_flight"] {
            let toml = format!("[concurrency]\n{key} = 9223372036854775807\n");
            let config: DispatcherConfig =
                Figment::from(Serialized::defaults(DispatcherConfig::default()))
                    .merge(Toml::string(&toml))
                    .extract()
                    .expect("a usize");
            let error = config.into_settings().expect_err("refused").to_string();
            assert!(error.contains(&format!("concurrency.{key}")), "{error}");
        }
    }

    #[test]
    fn the_group_protocol_sets_the_consumer() {
        let settings = DispatcherConfig::default()
            .into_settings()
            .expect("defaults are valid");
        let config = settings.consumer_config();
        assert_eq!(config.get("group.protocol"), Some("consumer"));
        assert_eq!(config.get("partition.assignment.strategy"), None);
        assert_eq!(config.get("group.remote.assignor"), Some("range"));
        let mut uniform = DispatcherConfig::default();
        uniform
            .kafka
            .properties
            .insert("group.remote.assignor".to_owned(), "uniform".to_owned());
        let config = uniform.into_settings().expect("uniform").consumer_config();
        assert_eq!(config.get("group.remote.assignor"), Some("uniform"));

        let mut classic = DispatcherConfig {
            group_protocol: GroupProtocol::Classic,
            group_instance_id: Some("dispatcher-0".to_owned()),
            session_timeout_ms: Some(10_000),
            ..DispatcherConfig::default()
        };
        classic
            .kafka
            .properties
            .insert("heartbeat.interval.ms".to_owned(), "1000".to_owned());
        let config = classic.into_settings().expect("classic").consumer_config();
        assert_eq!(config.get("group.protocol"), Some("classic"));
        assert_eq!(
            config.get("partition.assignment.strategy"),
            Some("cooperative-sticky")
        );
        assert_eq!(config.get("session.timeout.ms"), Some("10000"));
        assert_eq!(config.get("group.instance.id"), Some("dispatcher-0"));
        assert_eq!(config.get("heartbeat.interval.ms"), Some("1000"));
    }

    #[test]
    fn the_ledger_is_off_unless_a_url_is_given() {
        let settings = DispatcherConfig::default()
            .into_settings()
            .expect("defaults are valid");
        assert!(settings.ledger.is_none());

        let mut config = DispatcherConfig::default();
        config.ledger.redis_url = Some(String::new());
        assert!(config.into_settings().expect("empty URL").ledger.is_none());

        let mut config = DispatcherConfig::default();
        config.ledger.redis_url = Some("redis://127.0.0.1:6379/1".to_owned());
        let ledger = config
            .into_settings()
            .expect("a ledger")
            .ledger
            .and_then(|ledger| ledger.redis)
            .expect("configured");
        assert_eq!(ledger.ttl, Duration::from_secs(604_800));
        assert_eq!(ledger.key_prefix, "hookline:delivered:");
        assert_eq!(ledger.timeout, Duration::from_millis(1_000));
    }

    #[test]
    fn a_file_with_an_unknown_key_is_refused_with_its_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "[retry]\nbase_ms = 100\nmax_attemps = 3\n").expect("write");
        let error = DispatcherConfig::load(Some(&path))
            .expect_err("typo refused")
            .to_string();
        assert!(error.contains("max_attemps"), "{error}");
        std::fs::write(&path, "[retry]\nbase_ms = 100\nmax_attempts = 3\n").expect("write");
        let config = DispatcherConfig::load(Some(&path)).expect("valid file");
        assert_eq!(config.retry.max_attempts, 3);
        assert_eq!(config.retry.base_ms, 100);
    }
}

mod attempts;
mod cancellations;
mod fanout;
mod ledger;
mod lifecycle;
mod operator;
mod outbound;
mod telemetry;

#[cfg(test)]
pub(crate) mod fuzz;

#[cfg(test)]
mod registry_tests;

#[cfg(test)]
mod kafka_tests;
