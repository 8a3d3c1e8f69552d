//! HTML fragments of the endpoint and overview pages (`maud` bodies, no page shell, no
//! script): tables with captions and header scopes, a per-minute chart as inline SVG with
//! a table beside it for screen readers. Class names start with `hl-` for the console's
//! style sheet. Every value is escaped by `maud`.

use hookline_dlq::filter::format_ms;
use maud::{Markup, html};

use super::circuits::{CircuitSource, CircuitsReport};
use super::endpoints::{EndpointRow, EndpointState, EndpointsPage};
use super::lag::LagReport;
use super::overview::Overview;
use super::read::ReadStats;
use super::scrape::CircuitState;
use super::stats::StatusCounts;
use super::window::Window;
use crate::auth::ECHO_HIDDEN;

/// The endpoints page's body: one table per tenant. `hide_echoes` leaves the last errors'
/// response excerpts out (an endpoint may echo the payload). `actions` renders the cell of
/// buttons of a row (enable / disable forms with the console's CSRF token; empty for a
/// role that may not act).
pub fn endpoints_page(
    page: &EndpointsPage,
    hide_echoes: bool,
    actions: impl Fn(&EndpointRow) -> Markup,
) -> Markup {
    html! {
        section.hl-endpoints aria-labelledby="hl-endpoints-title" {
            h2 #hl-endpoints-title { "Endpoints" }
            p.hl-window { "Health over " (window_text(page.window)) "." }
            (read_notes(&page.attempts))
            (circuit_source(&page.circuits))
            @if page.tenants.is_empty() {
                p.hl-empty { "No endpoints in the endpoint table." }
            }
            @for tenant in &page.tenants {
                table.hl-table {
                    caption {
                        @match &tenant.tenant {
                            Some(name) => { "Tenant " strong { (name) } }
                            None => "Endpoints without a tenant",
                        }
                    }
                    thead {
                        tr {
                            th scope="col" { "Endpoint" }
                            th scope="col" { "URL" }
                            th scope="col" { "State" }
                            th scope="col" { "Success" }
                            th scope="col" { "Latency p50 / p95" }
                            th scope="col" { "Last error" }
                            th scope="col" { span.hl-visually-hidden { "Actions" } }
                        }
                    }
                    tbody {
                        @for row in &tenant.endpoints {
                            tr {
                                th scope="row" { code { (row.id) } }
                                td { code.hl-url { (row.url) } }
                                td { (state_cell(&row.state)) }
                                td { (success_cell(row)) }
                                td { (latency_cell(row)) }
                                td { (last_error_cell(row, hide_echoes)) }
                                td { (actions(row)) }
                            }
                        }
                    }
                }
            }
            @if !page.unreadable.is_empty() {
                details.hl-unreadable {
                    summary { (page.unreadable.len()) " endpoint configs cannot be read" }
                    ul {
                        @for (id, why) in &page.unreadable {
                            li { code { (id) } ": " (why) }
                        }
                    }
                }
            }
        }
    }
}

fn state_cell(state: &EndpointState) -> Markup {
    html! {
        @match state {
            EndpointState::Enabled => span.hl-state.hl-state-enabled { "enabled" },
            EndpointState::Disabled { reason, at_ms } => {
                span.hl-state.hl-state-disabled { "disabled" }
                @if let Some(reason) = reason { " " span.hl-reason { "(" (reason) ")" } }
                @if let Some(at) = at_ms { br; small { "since " time { (format_ms(*at)) } } }
            }
            EndpointState::CircuitOpen { circuit } => {
                span.hl-state.hl-state-circuit { (state.label()) }
                @if *circuit == CircuitState::HalfOpen { br; small { "probing" } }
            }
        }
    }
}

fn success_cell(row: &EndpointRow) -> Markup {
    let h = &row.health;
    html! {
        @match h.success_ratio {
            Some(ratio) => {
                (format!("{:.1}%", ratio * 100.0))
                br; small { (h.succeeded) " of " (h.attempts) " attempts" }
            }
            None => span.hl-none { "no attempts" },
        }
        @if h.parked > 0 { br; small { (h.parked) " parked" } }
        @if h.deferred > 0 { br; small { (h.deferred) " deferred" } }
    }
}

fn latency_cell(row: &EndpointRow) -> Markup {
    let h = &row.health;
    html! {
        @match (h.latency_p50_ms, h.latency_p95_ms) {
            (Some(p50), Some(p95)) => { (p50) " ms / " (p95) " ms" }
            _ => span.hl-none { "–" },
        }
    }
}

fn last_error_cell(row: &EndpointRow, hide_echoes: bool) -> Markup {
    html! {
        @match &row.health.last_error {
            Some(error) => {
                @if let Some(status) = error.http_status { "HTTP " (status) " " }
                code { (error.error_kind) }
                br; small { time { (format_ms(error.at_ms)) } " · " code { (error.event_id) } }
                @if let Some(excerpt) = &error.response_excerpt {
                    @if hide_echoes {
                        br; small.hl-none { "response " (ECHO_HIDDEN) }
                    } @else {
                        details { summary { "response" } pre.hl-excerpt { (excerpt) } }
                    }
                }
            }
            None => span.hl-none { "none" },
        }
    }
}

/// The overview page's body: totals, the per-minute chart and table, DLQ inflow, lag and
/// open circuits.
pub fn overview_page(overview: &Overview) -> Markup {
    html! {
        section.hl-overview aria-labelledby="hl-overview-title" {
            h2 #hl-overview-title { "Overview" }
            p.hl-window { (window_text(overview.window)) "." }
            (read_notes(&overview.attempts))
            (read_notes(&overview.dlq))
            (totals_list(&overview.totals, overview.dlq_inflow_total))
            (minute_chart(overview))
            details.hl-minutes {
                summary { "Per minute" }
                table.hl-table {
                    caption { "Deliveries and DLQ inflow per minute" }
                    thead { tr {
                        th scope="col" { "Minute" }
                        th scope="col" { "Succeeded" }
                        th scope="col" { "Failed" }
                        th scope="col" { "Retried" }
                        th scope="col" { "Deferred" }
                        th scope="col" { "Parked" }
                        th scope="col" { "DLQ inflow" }
                    } }
                    tbody {
                        @for m in overview.minutes.iter().rev() {
                            tr {
                                th scope="row" { time { (format_ms(m.start_ms)) } }
                                td { (m.deliveries.succeeded) }
                                td { (m.deliveries.failed) }
                                td { (m.deliveries.retried) }
                                td { (m.deliveries.deferred) }
                                td { (m.deliveries.parked) }
                                td { (m.dlq_inflow) }
                            }
                        }
                    }
                }
            }
            (lag_table(&overview.lag))
            (circuits_list(&overview.circuits))
        }
    }
}

fn totals_list(totals: &StatusCounts, dlq: u64) -> Markup {
    html! {
        dl.hl-totals {
            div { dt { "Succeeded" } dd { (totals.succeeded) } }
            div { dt { "Failed attempts" } dd { (totals.failed) } }
            div { dt { "Retried" } dd { (totals.retried) } }
            div { dt { "Deferred" } dd { (totals.deferred) } }
            div { dt { "Parked (DLQ)" } dd { (totals.parked) } }
            div { dt { "DLQ inflow" } dd { (dlq) } }
        }
    }
}

/// Stacked bars, one per minute: succeeded, failed, parked; a line of DLQ inflow is left
/// to the table (the chart is decoration: `aria-hidden`, the table says the same).
fn minute_chart(overview: &Overview) -> Markup {
    const HEIGHT: u64 = 120;
    const BAR: usize = 8;
    let peak = overview
        .minutes
        .iter()
        .map(|m| m.deliveries.succeeded + m.deliveries.failed + m.deliveries.parked)
        .max()
        .unwrap_or(0)
        .max(1);
    let scale = |n: u64| n.saturating_mul(HEIGHT) / peak;
    let width = overview.minutes.len().saturating_mul(BAR);
    html! {
        svg.hl-chart viewBox=(format!("0 0 {width} {HEIGHT}")) preserveAspectRatio="none"
            role="img" aria-hidden="true" {
            @for (index, m) in overview.minutes.iter().enumerate() {
                @let x = index * BAR;
                @let ok = scale(m.deliveries.succeeded);
                @let failed = scale(m.deliveries.failed);
                @let parked = scale(m.deliveries.parked);
                rect.hl-bar-succeeded x=(x) y=(HEIGHT.saturating_sub(ok)) width=(BAR - 1) height=(ok) {}
                rect.hl-bar-failed x=(x) y=(HEIGHT.saturating_sub(ok + failed)) width=(BAR - 1) height=(failed) {}
                rect.hl-bar-parked x=(x) y=(HEIGHT.saturating_sub(ok + failed + parked))
                    width=(BAR - 1) height=(parked) {}
            }
        }
    }
}

/// The lag table: one row per topic.
pub fn lag_table(lag: &LagReport) -> Markup {
    html! {
        table.hl-table.hl-lag {
            caption { "Consumer lag of " code { (lag.group) } ": " (lag.total) " records" }
            thead { tr {
                th scope="col" { "Topic" }
                th scope="col" { "Group" }
                th scope="col" { "Lag" }
                th scope="col" { "Partitions" }
            } }
            tbody {
                @for row in &lag.topics {
                    tr {
                        th scope="row" { code { (row.topic) } }
                        td { code { (row.group) } }
                        td { (row.lag) }
                        td {
                            (row.partitions)
                            @if row.uncommitted_partitions > 0 {
                                " (" (row.uncommitted_partitions) " without a commit)"
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The open circuits, and where they were learnt.
pub fn circuits_list(circuits: &CircuitsReport) -> Markup {
    html! {
        section.hl-circuits aria-labelledby="hl-circuits-title" {
            h3 #hl-circuits-title { "Open circuits" }
            (circuit_source(circuits))
            @if circuits.open.is_empty() {
                p.hl-empty { "None." }
            } @else {
                ul {
                    @for (endpoint, state) in &circuits.open {
                        li {
                            code { (endpoint) } " "
                            @match state {
                                CircuitState::Open => "open",
                                CircuitState::HalfOpen => "half-open",
                            }
                        }
                    }
                }
            }
        }
    }
}

fn circuit_source(circuits: &CircuitsReport) -> Markup {
    html! {
        p.hl-source {
            @match circuits.source {
                CircuitSource::Metrics => "Circuits from the dispatchers' metrics.",
                CircuitSource::AttemptLog => "Circuits from the attempt log (no dispatcher metrics URLs configured).",
            }
            @if circuits.incomplete { " A dispatcher has more open circuits than it names." }
        }
        @for scrape in circuits.scrapes.iter().filter(|s| s.error.is_some()) {
            p.hl-warning role="status" {
                "Could not read " code { (scrape.url) } ": " (scrape.error.as_deref().unwrap_or_default())
            }
        }
    }
}

fn read_notes(stats: &ReadStats) -> Markup {
    html! {
        @if !stats.topic_exists {
            p.hl-warning role="status" { "The topic " code { (stats.topic) } " does not exist." }
        }
        @if stats.truncated {
            p.hl-warning role="status" {
                "Partial figures: the read of " code { (stats.topic) } " stopped at "
                (stats.records_read) " records."
            }
        }
        @if stats.undecodable > 0 {
            p.hl-note { (stats.undecodable) " records of " code { (stats.topic) } " could not be decoded." }
        }
    }
}

fn window_text(window: Window) -> String {
    format!(
        "{} to {}",
        format_ms(window.since_ms),
        format_ms(window.until_ms.saturating_sub(1))
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::insight::endpoints::TenantEndpoints;
    use crate::insight::stats::Health;

    fn page(row: EndpointRow) -> EndpointsPage {
        EndpointsPage {
            window: Window {
                since_ms: 0,
                until_ms: 900_001,
            },
            tenants: vec![TenantEndpoints {
                tenant: Some("acme<script>".into()),
                endpoints: vec![row],
            }],
            unreadable: BTreeMap::new(),
            circuits: CircuitsReport::from_attempt_log(Vec::new()),
            attempts: ReadStats::default(),
        }
    }

    #[test]
    fn the_endpoints_table_escapes_and_shows_the_state() {
        let row = EndpointRow {
            id: "ep-1".into(),
            url: "https://h.example/a?k=redacted".into(),
            description: None,
            state: EndpointState::Disabled {
                reason: Some("manual by <b>eve</b>".into()),
                at_ms: Some(0),
            },
            circuit: None,
            health: Health {
                attempts: 4,
                succeeded: 3,
                success_ratio: Some(0.75),
                ..Health::default()
            },
        };
        let html = endpoints_page(&page(row), false, |r| html! { button { "enable " (r.id) } })
            .into_string();
        assert!(html.contains("acme&lt;script&gt;"), "{html}");
        assert!(html.contains("manual by &lt;b&gt;eve&lt;/b&gt;"), "{html}");
        assert!(html.contains("75.0%"), "{html}");
        assert!(html.contains("3 of 4 attempts"), "{html}");
        assert!(html.contains("<button>enable ep-1</button>"), "{html}");
        assert!(html.contains("https://h.example/a?k=redacted"), "{html}");
    }

    #[test]
    fn the_last_errors_response_is_hidden_when_asked() {
        let row = EndpointRow {
            id: "ep-1".into(),
            url: "https://h.example/a".into(),
            description: None,
            state: EndpointState::Enabled,
            circuit: None,
            health: Health {
                last_error: Some(crate::insight::stats::LastError {
                    at_ms: 0,
                    event_id: "evt-1".into(),
                    attempt: 2,
                    http_status: Some(400),
                    error_kind: "client_error".into(),
                    response_excerpt: Some("bad field: jane@example.com".into()),
                }),
                ..Health::default()
            },
        };
        let shown = endpoints_page(&page(row.clone()), false, |_| html! {}).into_string();
        assert!(shown.contains("jane@example.com"), "{shown}");
        let hidden = endpoints_page(&page(row), true, |_| html! {}).into_string();
        assert!(!hidden.contains("jane@example.com"), "{hidden}");
        assert!(
            hidden.contains(ECHO_HIDDEN) && hidden.contains("HTTP 400"),
            "{hidden}"
        );
    }
}
