//! How records look to people: table rows with fixed-width columns (so `--follow` can
//! print as records arrive), and a summary by reason, endpoint and tenant. A record whose payload
//! was cut to fit the DLQ is marked in both. Every text from a record is shown with its
//! control characters escaped ([`escape_control`]). Pure: no I/O.

use std::collections::BTreeMap;

use hookline_core::envelope::DlqEnvelope;
use serde_json::{Value, json};

use crate::escape::escape_control;
use crate::filter::format_ms;
use crate::json::{to_json, undecodable_json};
use crate::record::Undecodable;
use crate::select::{Selected, SelectedItem};

const COLUMNS: [(&str, usize); 9] = [
    ("PLACE", 9),
    ("PARKED AT (UTC)", 19),
    ("REASON", 20),
    ("ENDPOINT", 16),
    ("TENANT", 12),
    ("EVENT TYPE", 18),
    ("EVENT ID", 40),
    ("ATT", 3),
    ("STATUS", 8),
];
const ERROR_WIDTH: usize = 60;

/// The table's header line.
pub fn table_header() -> String {
    let mut line = String::new();
    for (name, width) in COLUMNS {
        line.push_str(&format!("{name:<width$}  "));
    }
    line.push_str("ERROR");
    line
}

fn cell(text: &str, width: usize) -> String {
    let text = escape_control(text);
    let count = text.chars().count();
    if count <= width {
        format!("{text:<width$}")
    } else {
        let cut: String = text.chars().take(width.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

fn short_time(ms: i64) -> String {
    // `2024-05-01T12:00:00.000Z` shown as `2024-05-01 12:00:00`.
    format_ms(ms).replace('T', " ").chars().take(19).collect()
}

/// The mark of an envelope whose payload was cut to fit the DLQ (`None` for a whole one),
/// shown at the head of its row's ERROR column.
pub fn truncation_mark(e: &DlqEnvelope) -> Option<String> {
    e.original_payload_truncated
        .then(|| match e.original_payload_size {
            Some(size) => format!(
                "[payload truncated: {} of {size} bytes]",
                e.original_payload_bytes.len()
            ),
            None => "[payload truncated]".to_owned(),
        })
}

/// A record's table row, followed by one line per action in its history.
pub fn table_row(selected: &Selected) -> String {
    let r = &selected.record;
    let e = &r.envelope;
    let attempts = e.attempts.to_string();
    let cells = [
        r.place().to_string(),
        short_time(e.error_timestamp_ms),
        e.error_reason.code().to_owned(),
        e.endpoint_id.clone().unwrap_or_else(|| "-".into()),
        e.tenant_id.clone().unwrap_or_else(|| "-".into()),
        e.event_type.clone().unwrap_or_else(|| "-".into()),
        e.event_id.clone(),
        attempts,
        selected.status().as_str().to_owned(),
    ];
    let mut line = String::new();
    for (text, (_, width)) in cells.iter().zip(COLUMNS) {
        line.push_str(&cell(text, width));
        line.push_str("  ");
    }
    // A response body's line breaks and tabs read better as spaces; other controls are escaped.
    let mut error = e.error_message.replace(['\n', '\r', '\t'], " ");
    if let Some(mark) = truncation_mark(e) {
        error = format!("{mark} {error}");
    }
    line.push_str(cell(&error, ERROR_WIDTH).trim_end());
    for action in &selected.history.0 {
        line.push_str(&format!(
            "\n    {} {} by {}",
            escape_control(&action.at),
            action.action.as_str(),
            escape_control(&action.by)
        ));
        if let Some(role) = &action.role {
            line.push_str(&format!(" ({})", escape_control(role)));
        }
        if let Some(target) = &action.target {
            line.push_str(&format!(" -> {}", escape_control(target)));
        }
        if let Some(note) = &action.note {
            line.push_str(&format!(": {}", escape_control(note)));
        }
    }
    line
}

/// The table row of a record that could not be decoded.
pub fn undecodable_row(u: &Undecodable) -> String {
    let place = format!("{}/{}", u.partition, u.offset);
    let at = u.timestamp_ms.map(short_time).unwrap_or_default();
    format!(
        "{}  {}  {}  {}",
        cell(&place, COLUMNS[0].1),
        cell(&at, COLUMNS[1].1),
        cell("UNDECODABLE", COLUMNS[2].1),
        escape_control(&u.error)
    )
}

/// An item as printed: its table row (with its history), or one JSON line.
pub fn item_text(item: &SelectedItem, table: bool) -> String {
    match (item, table) {
        (SelectedItem::Record(s), true) => table_row(s),
        (SelectedItem::Record(s), false) => to_json(s).to_string(),
        (SelectedItem::Undecodable(u), true) => undecodable_row(u),
        (SelectedItem::Undecodable(u), false) => undecodable_json(u).to_string(),
    }
}

/// Counts by reason, endpoint, tenant and status, and the oldest and newest parked times.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Records counted.
    pub total: u64,
    /// By reason code.
    pub by_reason: BTreeMap<String, u64>,
    /// By endpoint id (`-` for none).
    pub by_endpoint: BTreeMap<String, u64>,
    /// By tenant id, of the records that have one (direct deliveries are not counted).
    pub by_tenant: BTreeMap<String, u64>,
    /// By status.
    pub by_status: BTreeMap<String, u64>,
    /// The oldest `error_timestamp`, epoch milliseconds.
    pub oldest_ms: Option<i64>,
    /// The newest `error_timestamp`, epoch milliseconds.
    pub newest_ms: Option<i64>,
    /// Records that could not be decoded.
    pub undecodable: u64,
    /// Records whose payload was cut to fit the DLQ (they cannot be redriven).
    pub truncated: u64,
    /// Matching records not counted because they are handled (without `--all`).
    pub hidden_handled: u64,
}

impl Summary {
    /// Counts a record.
    pub fn add(&mut self, selected: &Selected) {
        let e = &selected.record.envelope;
        self.total += 1;
        *self
            .by_reason
            .entry(e.error_reason.code().into())
            .or_default() += 1;
        let endpoint = e.endpoint_id.clone().unwrap_or_else(|| "-".into());
        *self.by_endpoint.entry(endpoint).or_default() += 1;
        if let Some(tenant) = &e.tenant_id {
            *self.by_tenant.entry(tenant.clone()).or_default() += 1;
        }
        *self
            .by_status
            .entry(selected.status().as_str().into())
            .or_default() += 1;
        self.truncated += u64::from(e.original_payload_truncated);
        let at = e.error_timestamp_ms;
        self.oldest_ms = Some(self.oldest_ms.map_or(at, |o| o.min(at)));
        self.newest_ms = Some(self.newest_ms.map_or(at, |n| n.max(at)));
    }

    /// The summary as text, largest counts first.
    pub fn to_text(&self) -> String {
        let mut out = format!("{} records", self.total);
        if self.hidden_handled > 0 {
            out.push_str(&format!(
                " ({} redriven or resolved not counted; --all counts them)",
                self.hidden_handled
            ));
        }
        out.push('\n');
        if let (Some(oldest), Some(newest)) = (self.oldest_ms, self.newest_ms) {
            out.push_str(&format!(
                "oldest  {}\nnewest  {}\n",
                format_ms(oldest),
                format_ms(newest)
            ));
        }
        for (title, counts) in [
            ("by reason", &self.by_reason),
            ("by endpoint", &self.by_endpoint),
            ("by tenant", &self.by_tenant),
            ("by status", &self.by_status),
        ] {
            if counts.is_empty() {
                continue;
            }
            out.push_str(&format!("{title}:\n"));
            let mut sorted: Vec<_> = counts.iter().collect();
            sorted.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            for (name, count) in sorted {
                out.push_str(&format!("  {count:>8}  {}\n", escape_control(name)));
            }
        }
        if self.truncated > 0 {
            out.push_str(&format!(
                "payload truncated (cannot be redriven): {}\n",
                self.truncated
            ));
        }
        if self.undecodable > 0 {
            out.push_str(&format!("undecodable: {}\n", self.undecodable));
        }
        out
    }

    /// The summary as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "total": self.total,
            "by_reason": self.by_reason,
            "by_endpoint": self.by_endpoint,
            "by_tenant": self.by_tenant,
            "by_status": self.by_status,
            "oldest": self.oldest_ms.map(format_ms),
            "newest": self.newest_ms.map(format_ms),
            "undecodable": self.undecodable,
            "truncated": self.truncated,
            "hidden_handled": self.hidden_handled,
        })
    }
}

#[cfg(test)]
mod tests {
    use hookline_core::envelope::ErrorReason;

    use super::*;
    use crate::actions::{Action, ActionKind, History};
    use crate::record::fixtures::record;

    fn selected(endpoint: &str, reason: ErrorReason, at: i64) -> Selected {
        Selected {
            record: record(0, 7, endpoint, reason, at),
            history: History::default(),
        }
    }

    #[test]
    fn rows_line_up_with_the_header_and_show_history() {
        let mut s = selected("ep-a", ErrorReason::RetriesExhausted, 1_714_564_800_000);
        s.history.0.push(Action {
            note: Some("receiver fixed".into()),
            ..Action::new(ActionKind::Resolved, 1_714_564_900_000, "bob")
        });
        let row = table_row(&s);
        let header = table_header();
        let first = row.lines().next().expect("a line");
        assert_eq!(first.find("2024-05-01 12:00:00"), header.find("PARKED AT"));
        assert_eq!(first.find("resolved"), header.find("STATUS"));
        assert_eq!(first.find("HTTP 503"), header.find("ERROR"));
        assert_eq!(
            row.lines().nth(1),
            Some("    2024-05-01T12:01:40.000Z resolved by bob: receiver fixed")
        );
        assert_eq!(cell("abcdef", 4), "abc…");
    }

    #[test]
    fn summary_counts_and_bounds() {
        let mut summary = Summary::default();
        summary.add(&selected("a", ErrorReason::BlockedUrl, 3_000));
        summary.add(&selected("a", ErrorReason::RetriesExhausted, 1_000));
        summary.add(&selected("b", ErrorReason::RetriesExhausted, 2_000));
        assert_eq!(summary.total, 3);
        assert_eq!(summary.by_reason["retries_exhausted"], 2);
        assert_eq!(summary.by_endpoint["a"], 2);
        assert_eq!(summary.oldest_ms, Some(1_000));
        assert_eq!(summary.newest_ms, Some(3_000));
        let text = summary.to_text();
        assert!(text.starts_with("3 records\n"), "{text}");
        assert!(
            text.contains("by reason:\n         2  retries_exhausted\n         1  blocked_url\n"),
            "{text}"
        );
        assert_eq!(summary.to_json()["by_endpoint"]["b"], 1);
        assert_eq!(summary.to_json()["truncated"], 0);
        assert!(!text.contains("truncated"), "{text}");
        assert!(
            !text.contains("by tenant"),
            "no tenants, no section: {text}"
        );
        assert_eq!(summary.to_json()["by_tenant"], json!({}));
    }

    #[test]
    fn the_tenant_has_a_column_and_a_summary_section() {
        let mut s = selected("ep-a", ErrorReason::RetriesExhausted, 1_714_564_800_000);
        s.record.envelope.tenant_id = Some("acme".into());
        let row = table_row(&s);
        let header = table_header();
        assert_eq!(row.find("acme"), header.find("TENANT"), "{header}\n{row}");
        assert_eq!(row.find("invoice.paid"), header.find("EVENT TYPE"));
        let direct = table_row(&selected("ep-b", ErrorReason::BlockedUrl, 0));
        assert_eq!(direct.find("-  "), header.find("TENANT"), "{direct}");

        let mut summary = Summary::default();
        summary.add(&s);
        summary.add(&s);
        summary.add(&selected("ep-b", ErrorReason::BlockedUrl, 0));
        assert_eq!(summary.by_tenant.len(), 1);
        assert_eq!(summary.by_tenant["acme"], 2);
        assert!(
            summary.to_text().contains("by tenant:\n         2  acme\n"),
            "{}",
            summary.to_text()
        );
        assert_eq!(summary.to_json()["by_tenant"]["acme"], 2);
    }

    #[test]
    fn control_characters_from_records_are_escaped_in_rows_and_summaries() {
        let mut s = selected("ep\u{1b}[7m\u{7}", ErrorReason::RetriesExhausted, 0);
        let e = &mut s.record.envelope;
        e.event_id = "evt\u{1b}[2J".into();
        e.tenant_id = Some("t\u{9b}31m".into());
        e.event_type = Some("a\nb".into());
        e.error_message = "HTTP 500: \u{1b}[31mboom\r\n\tagain".into();
        s.history.0.push(Action {
            note: Some("see\u{1b}[8m".into()),
            ..Action::new(ActionKind::Resolved, 0, "eve\u{1b}[1m")
        });
        let row = table_row(&s);
        let mut summary = Summary::default();
        summary.add(&s);
        let text = summary.to_text();
        for out in [&row, &text] {
            assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        }
        assert!(row.contains("ep\\x1b[7m\\x07"), "{row}");
        assert!(text.contains("ep\\x1b[7m\\x07"), "{text}");
        assert!(row.contains("evt\\x1b[2J"), "{row}");
        assert!(row.contains("a\\nb"), "{row}");
        assert!(row.contains("HTTP 500: \\x1b[31mboom"), "{row}");
        assert!(row.contains("by eve\\x1b[1m: see\\x1b[8m"), "{row}");
        assert_eq!(row.lines().count(), 2, "one line and its history: {row}");
        assert!(text.contains("t\\u{9b}31m"), "{text}");
        let undecodable = Undecodable {
            partition: 0,
            offset: 1,
            timestamp_ms: None,
            key: Some(b"k\x1b[31m".to_vec()),
            error: "bad \u{1b}[31m".into(),
        };
        assert!(undecodable_row(&undecodable).ends_with("bad \\x1b[31m"));
    }

    fn cut(mut s: Selected) -> Selected {
        let e = &mut s.record.envelope;
        e.original_payload_bytes.truncate(4);
        e.original_payload_truncated = true;
        e.original_payload_size = Some(1_500_000);
        s
    }

    #[test]
    fn a_cut_payload_is_marked_in_the_row_and_counted_in_the_summary() {
        let s = cut(selected(
            "ep-a",
            ErrorReason::RetriesExhausted,
            1_714_564_800_000,
        ));
        let row = table_row(&s);
        let header = table_header();
        assert_eq!(
            row.find("[payload truncated: 4 of 1500000 bytes] HTTP 503"),
            header.find("ERROR"),
            "{row}"
        );
        let whole = table_row(&selected("ep-a", ErrorReason::RetriesExhausted, 0));
        assert!(!whole.contains("truncated"), "{whole}");
        let mut unknown_size = s.clone();
        unknown_size.record.envelope.original_payload_size = None;
        assert!(table_row(&unknown_size).contains("[payload truncated] HTTP 503"));

        let mut summary = Summary::default();
        summary.add(&s);
        summary.add(&selected("b", ErrorReason::BlockedUrl, 3_000));
        assert_eq!(summary.truncated, 1);
        assert!(
            summary
                .to_text()
                .contains("payload truncated (cannot be redriven): 1\n")
        );
        assert_eq!(summary.to_json()["truncated"], 1);
    }
}
