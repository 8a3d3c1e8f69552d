//! The endpoints page's rows: each endpoint of the table with its redacted URL, its state
//! (enabled, disabled and why, circuit open) and its health over the window (pure; the
//! reads are in [`super::Insight::endpoints`]).

use std::collections::{BTreeMap, HashMap};

use hookline_core::endpoint::EndpointConfig;
use serde::Serialize;

use super::circuits::CircuitsReport;
use super::read::ReadStats;
use super::redact::redact_endpoint_url;
use super::scrape::CircuitState;
use super::stats::{Health, Tally};
use super::window::Window;

/// What an endpoint is doing, the first that holds: disabled, circuit not closed, enabled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum EndpointState {
    /// Deliveries are made.
    Enabled,
    /// Deliveries are parked (`endpoint_disabled`).
    Disabled {
        /// Why (`gone: HTTP 410`, `failing: HTTP 500`, `manual by alice: INC-42`...).
        reason: Option<String>,
        /// Since when, in epoch milliseconds.
        at_ms: Option<i64>,
    },
    /// Enabled, but its breaker is open or half-open: records go to a tier without an
    /// attempt (half-open: a few probes are let through).
    CircuitOpen {
        /// Open or half-open.
        circuit: CircuitState,
    },
}

impl EndpointState {
    /// The state of an endpoint with `config` whose circuit is `circuit`.
    pub fn of(config: &EndpointConfig, circuit: Option<CircuitState>) -> Self {
        match (config.enabled, circuit) {
            (false, _) => EndpointState::Disabled {
                reason: config.disabled_reason.clone(),
                at_ms: config.disabled_at_ms,
            },
            (true, Some(circuit)) => EndpointState::CircuitOpen { circuit },
            (true, None) => EndpointState::Enabled,
        }
    }

    /// A short label: `enabled`, `disabled`, `circuit open`, `circuit half-open`.
    pub fn label(&self) -> &'static str {
        match self {
            EndpointState::Enabled => "enabled",
            EndpointState::Disabled { .. } => "disabled",
            EndpointState::CircuitOpen {
                circuit: CircuitState::Open,
            } => "circuit open",
            EndpointState::CircuitOpen {
                circuit: CircuitState::HalfOpen,
            } => "circuit half-open",
        }
    }
}

/// One endpoint's row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EndpointRow {
    /// The endpoint id.
    pub id: String,
    /// Its URL without user info, query values or fragment.
    pub url: String,
    /// Its description, if any.
    pub description: Option<String>,
    /// What it is doing.
    pub state: EndpointState,
    /// Its breaker when not closed, even when disabled.
    pub circuit: Option<CircuitState>,
    /// Its figures over the window.
    pub health: Health,
}

/// The endpoints of one tenant (or of none: direct deliveries only), by id.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantEndpoints {
    /// The tenant; `None` for endpoints without one.
    pub tenant: Option<String>,
    /// Its endpoints, by id.
    pub endpoints: Vec<EndpointRow>,
}

/// The endpoints page.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EndpointsPage {
    /// The health window.
    pub window: Window,
    /// The tenants, by name, endpoints without a tenant first.
    pub tenants: Vec<TenantEndpoints>,
    /// Ids whose config in the table cannot be read, with why (never a secret).
    pub unreadable: BTreeMap<String, String>,
    /// The open circuits, and where they were learnt.
    pub circuits: CircuitsReport,
    /// What the attempt log read went through.
    pub attempts: ReadStats,
}

/// The rows of `endpoints` (only `tenant`'s when given), grouped by tenant.
pub fn group_rows(
    endpoints: &BTreeMap<String, EndpointConfig>,
    tallies: HashMap<String, Tally>,
    circuits: &CircuitsReport,
    tenant: Option<&str>,
) -> Vec<TenantEndpoints> {
    let mut tallies = tallies;
    let mut groups: BTreeMap<Option<String>, Vec<EndpointRow>> = BTreeMap::new();
    for (id, config) in endpoints {
        if tenant.is_some_and(|want| config.tenant.as_deref() != Some(want)) {
            continue;
        }
        let circuit = circuits.state_of(id);
        let row = EndpointRow {
            id: id.clone(),
            url: redact_endpoint_url(&config.url),
            description: config.description.clone(),
            state: EndpointState::of(config, circuit),
            circuit,
            health: tallies.remove(id).unwrap_or_default().finish(),
        };
        groups.entry(config.tenant.clone()).or_default().push(row);
    }
    groups
        .into_iter()
        .map(|(tenant, endpoints)| TenantEndpoints { tenant, endpoints })
        .collect()
}

#[cfg(test)]
mod tests {
    use hookline_core::attempt_log::{AttemptKind, AttemptRecord};

    use super::*;

    fn config(url: &str, tenant: Option<&str>) -> EndpointConfig {
        EndpointConfig {
            tenant: tenant.map(str::to_owned),
            ..EndpointConfig::new(url, vec!["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into()])
        }
    }

    #[test]
    fn disabled_beats_an_open_circuit_which_beats_enabled() {
        let on = config("https://h.example/a", None);
        assert_eq!(EndpointState::of(&on, None), EndpointState::Enabled);
        assert_eq!(
            EndpointState::of(&on, Some(CircuitState::HalfOpen)).label(),
            "circuit half-open"
        );
        let off = EndpointConfig {
            enabled: false,
            disabled_reason: Some("manual by alice: INC-42".into()),
            disabled_at_ms: Some(7),
            ..on
        };
        assert_eq!(
            EndpointState::of(&off, Some(CircuitState::Open)),
            EndpointState::Disabled {
                reason: Some("manual by alice: INC-42".into()),
                at_ms: Some(7)
            }
        );
    }

    #[test]
    fn rows_are_grouped_by_tenant_redacted_and_filtered() {
        let mut endpoints = BTreeMap::new();
        endpoints.insert(
            "a".to_owned(),
            config("https://u:p@h.example/a?k=v", Some("acme")),
        );
        endpoints.insert("b".to_owned(), config("https://h.example/b", None));
        endpoints.insert("c".to_owned(), config("https://h.example/c", Some("acme")));
        endpoints.insert("d".to_owned(), config("https://h.example/d", Some("beta")));
        let mut tally = Tally::default();
        tally.add(&AttemptRecord {
            event_id: "e".into(),
            tenant_id: Some("acme".into()),
            endpoint_id: Some("a".into()),
            kind: AttemptKind::Attempt,
            attempt: 1,
            timestamp_ms: 1,
            duration_ms: Some(12),
            http_status: Some(200),
            error_kind: None,
            response_excerpt: None,
            tier: None,
            reason: None,
            deliveries: None,
            dispatcher_id: "d".into(),
            trace_id: None,
            published_at_ms: None,
            redriven_from: None,
        });
        let tallies = HashMap::from([("a".to_owned(), tally)]);
        let circuits = CircuitsReport::from_attempt_log(["c".to_owned()]);
        let all = group_rows(&endpoints, tallies.clone(), &circuits, None);
        let tenants: Vec<Option<&str>> = all.iter().map(|t| t.tenant.as_deref()).collect();
        assert_eq!(tenants, [None, Some("acme"), Some("beta")]);
        let acme = &all[1].endpoints;
        assert_eq!(acme[0].id, "a");
        assert_eq!(acme[0].url, "https://h.example/a?k=redacted");
        assert_eq!(acme[0].health.success_ratio, Some(1.0));
        assert_eq!(acme[0].health.latency_p50_ms, Some(12));
        assert_eq!(acme[1].state.label(), "circuit open");
        assert_eq!(acme[1].health.attempts, 0);
        let only = group_rows(&endpoints, tallies, &circuits, Some("beta"));
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].endpoints[0].id, "d");
    }
}
