//! [`Insight`]: the handles the endpoint and overview pages read through, and the reads
//! themselves (endpoint table, attempt log, DLQ timestamps, committed offsets, metrics).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use hookline_kafka::{KafkaSettings, Registry};
use hookline_producer::EndpointStore;
use hookline_producer::endpoints::{self, Switched};

use super::circuits::{CircuitsReport, scrape_all};
use super::config::InsightSettings;
use super::endpoints::{EndpointsPage, group_rows};
use super::error::{InsightError, Result};
use super::lag::{LagReport, consumer_lag};
use super::overview::{MinuteCounts, Overview};
use super::read::{attempts_in, timestamps_in};
use super::stats::{DeliveryStatus, Tally};
use super::window::{Minutes, Window, now_ms};

/// What the pages read through: Kafka, the registry (attempt records are Avro), the
/// endpoint table and an HTTP client for the dispatchers' `/metrics`. Cheap to share
/// behind an `Arc`; every call reads afresh.
pub struct Insight {
    kafka: KafkaSettings,
    registry: Arc<Registry>,
    store: EndpointStore,
    http: reqwest::Client,
    settings: InsightSettings,
}

impl std::fmt::Debug for Insight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Insight")
            .field("store", &self.store)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Insight {
    /// Handles for `settings` (see [`super::InsightConfig::to_settings`]), with the endpoint
    /// table in `endpoints_topic`.
    pub fn new(
        kafka: &KafkaSettings,
        registry: Arc<Registry>,
        endpoints_topic: &str,
        settings: InsightSettings,
    ) -> Result<Self> {
        let store = EndpointStore::new(kafka, endpoints_topic)
            .map_err(|e| InsightError::Endpoints(Box::new(e)))?;
        let http = reqwest::Client::builder()
            .timeout(settings.scrape_timeout)
            .connect_timeout(settings.scrape_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(InsightError::HttpClient)?;
        Ok(Insight {
            kafka: kafka.clone(),
            registry,
            store,
            http,
            settings,
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> &InsightSettings {
        &self.settings
    }

    /// The endpoints page: every endpoint of the table (only `tenant`'s when given), its
    /// redacted URL, state and health over the last `health_window_s`.
    pub async fn endpoints(&self, tenant: Option<&str>) -> Result<EndpointsPage> {
        let window = Window::last(now_ms(), self.settings.health_window);
        let list = self
            .store
            .list()
            .await
            .map_err(|e| InsightError::Endpoints(Box::new(e)))?;
        let mut tallies: HashMap<String, Tally> = HashMap::new();
        let attempts = attempts_in(
            &self.kafka,
            &self.registry,
            &self.settings.attempts_topic,
            window,
            self.settings.max_attempt_records,
            self.settings.read_timeout,
            |record| {
                if let Some(endpoint) = &record.endpoint_id
                    && list.endpoints.contains_key(endpoint)
                {
                    tallies.entry(endpoint.clone()).or_default().add(&record);
                }
            },
        )
        .await?;
        let circuits = if self.settings.dispatcher_metrics_urls.is_empty() {
            let open = tallies
                .iter()
                .filter(|(_, tally)| tally.latest_is_circuit_deferral())
                .map(|(id, _)| id.clone());
            CircuitsReport::from_attempt_log(open)
        } else {
            self.circuits().await
        };
        Ok(EndpointsPage {
            window,
            tenants: group_rows(&list.endpoints, tallies, &circuits, tenant),
            unreadable: list.unreadable,
            circuits,
            attempts,
        })
    }

    /// The overview page: deliveries per minute by status and DLQ inflow per minute over
    /// the last `overview_window_s`, the dispatchers' lag and the open circuits.
    pub async fn overview(&self) -> Result<Overview> {
        let minutes = Minutes::last(now_ms(), self.settings.overview_window);
        let window = minutes.window();
        let mut counts = MinuteCounts::new(minutes);
        // Per endpoint: (latest record time, whether it is a circuit deferral).
        let mut latest: HashMap<String, (i64, bool)> = HashMap::new();
        let attempts = attempts_in(
            &self.kafka,
            &self.registry,
            &self.settings.attempts_topic,
            window,
            self.settings.max_attempt_records,
            self.settings.read_timeout,
            |record| {
                let Some(status) = DeliveryStatus::of(&record) else {
                    return;
                };
                counts.delivery(record.timestamp_ms, status);
                if let Some(endpoint) = record.endpoint_id {
                    let circuit = status == DeliveryStatus::Deferred
                        && record.reason.as_deref() == Some("circuit_open");
                    let seen = latest.entry(endpoint).or_insert((i64::MIN, false));
                    if record.timestamp_ms >= seen.0 {
                        *seen = (record.timestamp_ms, circuit);
                    }
                }
            },
        )
        .await?;
        let dlq = timestamps_in(
            &self.kafka,
            &self.settings.dlq_topic,
            window,
            self.settings.max_attempt_records,
            self.settings.read_timeout,
            |at_ms| counts.dlq(at_ms),
        )
        .await?;
        let lag = self.lag().await?;
        let circuits = if self.settings.dispatcher_metrics_urls.is_empty() {
            let open: BTreeSet<String> = latest
                .into_iter()
                .filter(|(_, (_, circuit))| *circuit)
                .map(|(id, _)| id)
                .collect();
            CircuitsReport::from_attempt_log(open)
        } else {
            self.circuits().await
        };
        let (minutes, totals, dlq_inflow_total) = counts.finish();
        Ok(Overview {
            window,
            minutes,
            totals,
            dlq_inflow_total,
            lag,
            circuits,
            attempts,
            dlq,
        })
    }

    /// The dispatchers' consumer lag now, on the events topic, its retry tiers and its
    /// fan-out topic.
    pub async fn lag(&self) -> Result<LagReport> {
        consumer_lag(
            &self.kafka,
            &self.settings.events_topic,
            &self.settings.consumer_group,
        )
        .await
    }

    /// The open circuits now, from the dispatchers' `/metrics` (an empty report, from the
    /// metrics, when no URL is configured).
    pub async fn circuits(&self) -> CircuitsReport {
        scrape_all(&self.http, &self.settings.dispatcher_metrics_urls).await
    }

    /// Enables endpoint `id` as `hookline endpoints enable` does (`written: false` when it
    /// was enabled already). `by` is not stored in the endpoint (enabling clears the
    /// reason); the caller writes it to its audit trail.
    pub async fn enable_endpoint(&self, id: &str) -> Result<Switched> {
        Ok(endpoints::enable(&self.store, id).await?)
    }

    /// Disables endpoint `id` as `hookline endpoints disable` does, storing the reason
    /// `manual by <by>: <reason>` and the time.
    pub async fn disable_endpoint(
        &self,
        id: &str,
        reason: Option<&str>,
        by: &str,
    ) -> Result<Switched> {
        Ok(endpoints::disable(&self.store, id, reason, Some(by)).await?)
    }
}
