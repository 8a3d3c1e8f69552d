//! The DLQ selection as a page carries it: the filter form's fields (those of `hookline dlq
//! inspect`, comma-separated for several values) and the status, read from a query string
//! or a form, built into a [`Filter`], and written back into links and hidden fields.
//! Pure: no I/O.

use hookline_dlq::filter::format_ms;
use hookline_dlq::{Filter, FilterError, FilterSpec, Status};

use super::Params;

/// The fields of the filter form, in order.
pub const FIELDS: [&str; 9] = [
    "reason",
    "tenant",
    "endpoint",
    "event_type",
    "event_id",
    "since",
    "until",
    "status",
    "record",
];

/// Which statuses a selection keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StatusFilter {
    /// Open records only (as the CLI without `--all`).
    #[default]
    Open,
    /// Redriven ones only.
    Redriven,
    /// Resolved ones only.
    Resolved,
    /// All of them (`--all`).
    All,
}

impl StatusFilter {
    /// Every choice, in the form's order.
    pub const ALL: [StatusFilter; 4] = [
        StatusFilter::Open,
        StatusFilter::Resolved,
        StatusFilter::Redriven,
        StatusFilter::All,
    ];

    /// The value in the query string.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusFilter::Open => "open",
            StatusFilter::Redriven => "redriven",
            StatusFilter::Resolved => "resolved",
            StatusFilter::All => "all",
        }
    }

    /// The choice named `text` (empty: open).
    pub fn parse(text: &str) -> Option<StatusFilter> {
        match text {
            "" | "open" => Some(StatusFilter::Open),
            "redriven" => Some(StatusFilter::Redriven),
            "resolved" => Some(StatusFilter::Resolved),
            "all" => Some(StatusFilter::All),
            _ => None,
        }
    }

    /// Whether handled records must be read.
    pub fn include_handled(self) -> bool {
        self != StatusFilter::Open
    }

    /// Whether a record with `status` is kept.
    pub fn keeps(self, status: Status) -> bool {
        match self {
            StatusFilter::Open => status == Status::Open,
            StatusFilter::Redriven => status == Status::Redriven,
            StatusFilter::Resolved => status == Status::Resolved,
            StatusFilter::All => true,
        }
    }
}

/// A selection of DLQ records as the form gives it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    /// Reason codes.
    pub reason: String,
    /// Tenant ids.
    pub tenant: String,
    /// Endpoint ids.
    pub endpoint: String,
    /// Event types.
    pub event_type: String,
    /// Event ids.
    pub event_id: String,
    /// Parked at or after (RFC 3339, a date, or relative: 30m, 2h, 7d).
    pub since: String,
    /// Parked before.
    pub until: String,
    /// Statuses kept.
    pub status: StatusFilter,
    /// Explicit records, `<partition>/<offset>`.
    pub record: String,
}

impl Selector {
    /// Reads the fields from a query string or form; an unknown status is refused.
    pub fn from_params(params: &Params) -> Result<Selector, String> {
        let status = StatusFilter::parse(params.get("status")).ok_or_else(|| {
            format!(
                "status `{}` is not one of open, resolved, redriven, all",
                params.get("status")
            )
        })?;
        Ok(Selector {
            reason: params.get("reason").to_owned(),
            tenant: params.get("tenant").to_owned(),
            endpoint: params.get("endpoint").to_owned(),
            event_type: params.get("event_type").to_owned(),
            event_id: params.get("event_id").to_owned(),
            since: params.get("since").to_owned(),
            until: params.get("until").to_owned(),
            status,
            record: params.get("record").to_owned(),
        })
    }

    /// One record, whatever its status.
    pub fn record(place: &str) -> Selector {
        Selector {
            record: place.to_owned(),
            status: StatusFilter::All,
            ..Selector::default()
        }
    }

    /// The selection as the CLI's flags would give it.
    pub fn spec(&self) -> FilterSpec {
        let list = |text: &str| {
            if text.is_empty() {
                Vec::new()
            } else {
                vec![text.to_owned()]
            }
        };
        let time = |text: &str| (!text.is_empty()).then(|| text.to_owned());
        FilterSpec {
            reasons: list(&self.reason),
            endpoints: list(&self.endpoint),
            tenants: list(&self.tenant),
            event_types: list(&self.event_type),
            event_ids: list(&self.event_id),
            since: time(&self.since),
            until: time(&self.until),
            records: list(&self.record),
            ..FilterSpec::default()
        }
    }

    /// The validated filter, relative times resolved against `now_ms`.
    pub fn filter(&self, now_ms: i64) -> Result<Filter, FilterError> {
        self.spec().build(now_ms)
    }

    /// The same selection fixed in time, for an action confirmed now: relative times made
    /// absolute and, unless explicit records are named, `until` no later than `now_ms`, so
    /// that the action touches what the confirmation showed and not what was parked since.
    pub fn pinned(&self, filter: &Filter, now_ms: i64) -> Selector {
        let until = match (filter.until_ms, self.record.is_empty()) {
            (Some(until), true) => Some(until.min(now_ms)),
            (None, true) => Some(now_ms),
            (until, false) => until,
        };
        Selector {
            since: filter.since_ms.map(format_ms).unwrap_or_default(),
            until: until.map(format_ms).unwrap_or_default(),
            ..self.clone()
        }
    }

    /// The fields that are set, as name and value pairs (status always).
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let values = [
            &self.reason,
            &self.tenant,
            &self.endpoint,
            &self.event_type,
            &self.event_id,
            &self.since,
            &self.until,
            &self.status.as_str().to_owned(),
            &self.record,
        ];
        FIELDS
            .iter()
            .zip(values)
            .filter(|(_, v)| !v.is_empty())
            .map(|(n, v)| (*n, v.clone()))
            .collect()
    }

    /// The selection as a query string (without `?`).
    pub fn query(&self) -> String {
        let mut serializer = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in self.pairs() {
            serializer.append_pair(name, &value);
        }
        serializer.finish()
    }

    /// Whether any criterion is set besides the status.
    pub fn is_everything(&self) -> bool {
        self.pairs().iter().all(|(name, _)| *name == "status")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        Params(
            pairs
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn the_form_builds_the_clis_filter() {
        let s = Selector::from_params(&params(&[
            ("reason", "retries_exhausted,endpoint_disabled"),
            ("tenant", "acme"),
            ("endpoint", ""),
            ("since", "2024-05-01"),
            ("status", "all"),
            ("page", "3"),
        ]))
        .expect("valid");
        assert_eq!(s.status, StatusFilter::All);
        let filter = s.filter(0).expect("valid");
        assert_eq!(filter.reasons.len(), 2);
        assert_eq!(filter.tenants, ["acme"]);
        assert!(filter.endpoints.is_empty());
        assert_eq!(filter.since_ms, Some(1_714_521_600_000));
        assert_eq!(
            s.query(),
            "reason=retries_exhausted%2Cendpoint_disabled&tenant=acme&since=2024-05-01&status=all"
        );
        assert!(!s.is_everything());
        assert!(Selector::default().is_everything());
        assert!(Selector::from_params(&params(&[("status", "gone")])).is_err());
        let bad = Selector::from_params(&params(&[("reason", "nope")])).expect("read");
        assert!(
            bad.filter(0).is_err(),
            "an unknown reason is the filter's error"
        );
    }

    #[test]
    fn a_pinned_selection_is_absolute_and_ends_now() {
        let now = 1_714_564_800_000;
        let s = Selector {
            since: "2h".into(),
            ..Selector::default()
        };
        let pinned = s.pinned(&s.filter(now).expect("valid"), now);
        assert_eq!(pinned.since, "2024-05-01T10:00:00.000Z");
        assert_eq!(pinned.until, "2024-05-01T12:00:00.000Z");
        // Built again later, it selects the same window.
        let later = pinned.filter(now + 3_600_000).expect("valid");
        assert_eq!(later.since_ms, Some(now - 7_200_000));
        assert_eq!(later.until_ms, Some(now));
        // An explicit record is not cut by the clock (the dispatcher's may be ahead).
        let one = Selector::record("0/5");
        let pinned = one.pinned(&one.filter(now).expect("valid"), now);
        assert_eq!(pinned.until, "");
        assert_eq!(pinned.record, "0/5");
        // An earlier `until` stays.
        let old = Selector {
            until: "2024-01-01".into(),
            ..Selector::default()
        };
        let pinned = old.pinned(&old.filter(now).expect("valid"), now);
        assert_eq!(pinned.until, "2024-01-01T00:00:00.000Z");
    }

    #[test]
    fn statuses_keep_what_they_name() {
        assert!(StatusFilter::Open.keeps(Status::Open));
        assert!(!StatusFilter::Open.keeps(Status::Resolved));
        assert!(StatusFilter::Resolved.keeps(Status::Resolved));
        assert!(!StatusFilter::Resolved.keeps(Status::Redriven));
        assert!(StatusFilter::All.keeps(Status::Redriven));
        assert!(!StatusFilter::Open.include_handled());
        for s in StatusFilter::ALL {
            assert_eq!(StatusFilter::parse(s.as_str()), Some(s));
        }
    }
}
