//! The handle hook points call (deciding at once, never waiting) and the task that
//! publishes each notice as a normal delivery to the operator endpoint on the events topic,
//! so it is signed, retried through the tiers and parked like any other.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookline_core::WebhookEvent;
use hookline_core::event::DEFAULT_CONTENT_TYPE;
use hookline_producer::{Encoding, Publisher, PublisherConfig};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::gate::{Gate, Verdict};
use super::notice::Notice;
use crate::error::{DispatchError, Result};
use crate::metrics::OperatorMetrics;
use crate::settings::OperatorWebhooksSettings;
use crate::settings::Settings;

/// Notices let through and not yet published; one more is dropped and counted. The gate
/// lets at most `max_per_minute` through, so this is only reached while Kafka cannot take
/// them.
const BUFFER: usize = 256;

/// What the hook points hand notices to. Cloning is cheap; an operator that is off does
/// nothing.
#[derive(Clone, Default)]
pub(crate) struct Operator {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    endpoint_id: String,
    gate: Gate,
    tx: mpsc::Sender<Queued>,
    metrics: OperatorMetrics,
    /// When each endpoint's circuit opened, as this replica saw it.
    opened_at: Mutex<HashMap<String, i64>>,
}

struct Queued {
    id: String,
    notice: Notice,
}

impl std::fmt::Debug for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operator")
            .field("endpoint_id", &self.inner.as_ref().map(|i| &i.endpoint_id))
            .finish()
    }
}

impl Operator {
    /// An operator that sends nothing.
    pub(crate) fn off() -> Self {
        Operator::default()
    }

    /// Whether notices are sent at all (to skip building them).
    pub(crate) fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// Lets `notice` through the gate and hands it to the publishing task, or counts why
    /// not. Never waits.
    pub(crate) fn notify(&self, notice: Notice) {
        let Some(inner) = &self.inner else { return };
        let kind = notice.kind;
        match inner.gate.check(&notice) {
            Verdict::Send(id) => {
                if inner.tx.try_send(Queued { id, notice }).is_err() {
                    inner.metrics.count(kind, "dropped");
                    tracing::warn!(
                        notice = kind.as_str(),
                        "operational webhook dropped: its buffer is full"
                    );
                }
            }
            Verdict::AboutOperator => {
                inner.metrics.count(kind, "about_operator");
                tracing::warn!(
                    notice = kind.as_str(),
                    endpoint = notice.subject,
                    "the operator endpoint itself is in trouble; no operational webhook about \
                     it is sent to it"
                );
            }
            other => {
                if let Some(outcome) = other.outcome() {
                    inner.metrics.count(kind, outcome);
                }
            }
        }
    }

    /// Remembers when `endpoint`'s circuit opened; returns when it had opened when it
    /// closes (`at_ms` `None`).
    pub(crate) fn circuit_opened_at(&self, endpoint: &str, at_ms: Option<i64>) -> Option<i64> {
        let inner = self.inner.as_ref()?;
        let mut opened = inner
            .opened_at
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match at_ms {
            Some(at) => {
                opened.insert(endpoint.to_owned(), at);
                Some(at)
            }
            None => opened.remove(endpoint),
        }
    }
}

/// Starts the publishing task (on `tracker`) when `[operator_webhooks]` names an endpoint;
/// otherwise an operator that is off.
pub(crate) fn start(
    settings: &Settings,
    metrics: &OperatorMetrics,
    tracker: &TaskTracker,
    shutdown: &CancellationToken,
) -> Result<Operator> {
    let Some(operator) = &settings.operator_webhooks else {
        return Ok(Operator::off());
    };
    // JSON needs no registry: notices get through while the registry is down, which is
    // when records are parked.
    let config = PublisherConfig {
        max_payload_bytes: settings.max_payload_bytes,
        ..PublisherConfig::new(settings.events_topic.clone(), Encoding::Json)
    };
    let publisher = Publisher::new(&settings.kafka, None, config).map_err(|error| {
        DispatchError::Internal(format!(
            "creating the operational webhooks' publisher: {error}"
        ))
    })?;
    let (tx, rx) = mpsc::channel(BUFFER);
    let task = Task {
        publisher,
        settings: operator.clone(),
        metrics: metrics.clone(),
    };
    tracker.spawn(task.run(rx, shutdown.clone(), settings.shutdown_grace));
    tracing::info!(
        endpoint = operator.endpoint_id,
        types = ?operator.events.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
        "operational webhooks on"
    );
    Ok(Operator {
        inner: Some(Arc::new(Inner {
            endpoint_id: operator.endpoint_id.clone(),
            gate: Gate::new(operator),
            tx,
            metrics: metrics.clone(),
            opened_at: Mutex::default(),
        })),
    })
}

struct Task {
    publisher: Publisher,
    settings: OperatorWebhooksSettings,
    metrics: OperatorMetrics,
}

impl Task {
    /// Publishes what arrives, one at a time, until every handle is gone or shutdown plus
    /// `grace` (deliveries that drain after shutdown may still park).
    async fn run(
        self,
        mut rx: mpsc::Receiver<Queued>,
        shutdown: CancellationToken,
        grace: Duration,
    ) {
        let stop = async {
            shutdown.cancelled().await;
            tokio::time::sleep(grace).await;
        };
        tokio::pin!(stop);
        loop {
            let queued = tokio::select! {
                queued = rx.recv() => match queued {
                    Some(queued) => queued,
                    None => return,
                },
                () = &mut stop => return,
            };
            let kind = queued.notice.kind;
            let event = self.event(queued);
            tokio::select! {
                published = self.publisher.publish(&event) => match published {
                    Ok(_) => {
                        self.metrics.count(kind, "sent");
                        tracing::info!(
                            notice = kind.as_str(),
                            event_id = event.event_id,
                            "operational webhook published"
                        );
                    }
                    Err(error) => {
                        self.metrics.count(kind, "dropped");
                        tracing::warn!(
                            notice = kind.as_str(),
                            %error,
                            "operational webhook not published"
                        );
                    }
                },
                () = &mut stop => {
                    self.metrics.count(kind, "dropped");
                    return;
                }
            }
        }
    }

    /// The delivery of one notice to the operator endpoint.
    fn event(&self, queued: Queued) -> WebhookEvent {
        let Queued { id, notice } = queued;
        WebhookEvent {
            event_id: id,
            event_type: notice.kind.as_str().to_owned(),
            endpoint_id: Some(self.settings.endpoint_id.clone()),
            tenant_id: None,
            channels: Vec::new(),
            endpoint_url: None,
            payload: notice.body(),
            content_type: DEFAULT_CONTENT_TYPE.to_owned(),
            headers: BTreeMap::new(),
            created_at_ms: notice.at_ms,
            expires_at_ms: None,
        }
    }
}
