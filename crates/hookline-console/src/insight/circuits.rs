//! Which endpoints' circuits are open: from the dispatchers' `/metrics` when their URLs are
//! configured, else from the attempt log (an endpoint whose latest record is a
//! `circuit_open` deferral).

use std::collections::BTreeMap;

use serde::Serialize;
use url::Url;

use super::scrape::{CircuitGauges, CircuitState, ScrapeStatus, scrape};

/// Where the open circuits were learnt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CircuitSource {
    /// The dispatchers' `webhook_circuit_open` gauges (`dispatcher_metrics_urls`).
    Metrics,
    /// The attempt log: endpoints whose latest record in the window is a `circuit_open`
    /// deferral (no metrics URLs configured).
    AttemptLog,
}

/// The endpoints whose circuit breaker is not closed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CircuitsReport {
    /// Where it was learnt.
    pub source: CircuitSource,
    /// The endpoints, with their state (open on any dispatcher beats half-open).
    pub open: BTreeMap<String, CircuitState>,
    /// Whether a dispatcher counts more open circuits than it names (past 256): `open`
    /// is then incomplete.
    pub incomplete: bool,
    /// How each dispatcher's scrape went (empty for the attempt log).
    pub scrapes: Vec<ScrapeStatus>,
}

impl CircuitsReport {
    /// The state of `endpoint`'s circuit, when not closed.
    pub fn state_of(&self, endpoint: &str) -> Option<CircuitState> {
        self.open.get(endpoint).copied()
    }

    /// The report of endpoints whose latest attempt-log record was a circuit deferral.
    pub fn from_attempt_log(open: impl IntoIterator<Item = String>) -> Self {
        CircuitsReport {
            source: CircuitSource::AttemptLog,
            open: open
                .into_iter()
                .map(|id| (id, CircuitState::Open))
                .collect(),
            incomplete: false,
            scrapes: Vec::new(),
        }
    }

    /// The union of what the dispatchers said.
    pub fn merge(scrapes: Vec<ScrapeStatus>, gauges: &[CircuitGauges]) -> Self {
        let mut open = BTreeMap::new();
        let mut incomplete = false;
        for dispatcher in gauges {
            let named = u64::try_from(dispatcher.endpoints.len()).unwrap_or(u64::MAX);
            incomplete |= dispatcher.open > named;
            for (endpoint, state) in &dispatcher.endpoints {
                let merged = match (open.get(endpoint), state) {
                    (Some(CircuitState::Open), _) | (_, CircuitState::Open) => CircuitState::Open,
                    (Some(CircuitState::HalfOpen) | None, CircuitState::HalfOpen) => {
                        CircuitState::HalfOpen
                    }
                };
                open.insert(endpoint.clone(), merged);
            }
        }
        CircuitsReport {
            source: CircuitSource::Metrics,
            open,
            incomplete,
            scrapes,
        }
    }
}

/// Scrapes every dispatcher at once.
pub async fn scrape_all(client: &reqwest::Client, urls: &[Url]) -> CircuitsReport {
    let results = futures::future::join_all(urls.iter().map(|url| scrape(client, url))).await;
    let (statuses, gauges): (Vec<ScrapeStatus>, Vec<Option<CircuitGauges>>) =
        results.into_iter().unzip();
    let gauges: Vec<CircuitGauges> = gauges.into_iter().flatten().collect();
    CircuitsReport::merge(statuses, &gauges)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gauges(open: u64, endpoints: &[(&str, CircuitState)]) -> CircuitGauges {
        CircuitGauges {
            endpoints: endpoints
                .iter()
                .map(|(id, state)| ((*id).to_owned(), *state))
                .collect(),
            open,
        }
    }

    #[test]
    fn open_anywhere_is_open_and_a_capped_dispatcher_is_incomplete() {
        let report = CircuitsReport::merge(
            Vec::new(),
            &[
                gauges(
                    2,
                    &[("a", CircuitState::HalfOpen), ("b", CircuitState::Open)],
                ),
                gauges(
                    2,
                    &[("a", CircuitState::Open), ("c", CircuitState::HalfOpen)],
                ),
            ],
        );
        assert_eq!(report.state_of("a"), Some(CircuitState::Open));
        assert_eq!(report.state_of("b"), Some(CircuitState::Open));
        assert_eq!(report.state_of("c"), Some(CircuitState::HalfOpen));
        assert_eq!(report.state_of("d"), None);
        assert!(!report.incomplete);
        let capped =
            CircuitsReport::merge(Vec::new(), &[gauges(300, &[("a", CircuitState::Open)])]);
        assert!(capped.incomplete);
    }
}
