//! Which DLQ records a command works on: by reason, endpoint, tenant, event type, event id,
//! time range, partition, offset range, or an explicit list. Pure: no I/O.

mod time;

use hookline_core::envelope::ErrorReason;

pub use time::{TimeBound, format_ms, now_ms, parse_rfc3339_ms};

use crate::record::{DlqRecord, InvalidRecordRef, RecordRef};

/// What is wrong with a selection; nothing has been read or changed.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// A reason that is not one of the envelope's codes.
    #[error("unknown error reason `{given}` for --reason; valid reasons: {valid}")]
    UnknownReason {
        /// What was given.
        given: String,
        /// The valid codes, comma-separated.
        valid: String,
    },
    /// A time that is neither RFC 3339, a date, `now`, nor a duration back from now.
    #[error(
        "{flag} `{value}` is not a time: give RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01), `now`, or a duration back from now (30m, 2h 30m, 7d, 1w, PT15M)"
    )]
    InvalidTime {
        /// The flag it was given for.
        flag: &'static str,
        /// What was given.
        value: String,
        /// The parser's error, when there is one.
        #[source]
        source: Option<jiff::Error>,
    },
    /// `--since` is not before `--until`.
    #[error("the time range is empty: --since {since} is not before --until {until}")]
    EmptyTimeRange {
        /// The start, RFC 3339.
        since: String,
        /// The end, RFC 3339.
        until: String,
    },
    /// `--from-offset` is after `--to-offset`.
    #[error("the offset range is empty: --from-offset {from} is after --to-offset {to}")]
    EmptyOffsetRange {
        /// The first offset.
        from: i64,
        /// The last offset.
        to: i64,
    },
    /// A negative offset or partition.
    #[error("{flag} must not be negative (got {value})")]
    Negative {
        /// The flag.
        flag: &'static str,
        /// What was given.
        value: i64,
    },
    /// An explicit record that is not `<partition>/<offset>`.
    #[error("--record {0}")]
    RecordRef(#[from] InvalidRecordRef),
}

/// A selection as the user wrote it (the command-line flags), before validation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilterSpec {
    /// `--reason`: error reason codes or symbols; any of them matches.
    pub reasons: Vec<String>,
    /// `--endpoint`: endpoint ids; any of them matches.
    pub endpoints: Vec<String>,
    /// `--tenant`: tenant ids; any of them matches.
    pub tenants: Vec<String>,
    /// `--event-type`: event types; any of them matches.
    pub event_types: Vec<String>,
    /// `--event-id`: event ids; any of them matches.
    pub event_ids: Vec<String>,
    /// `--since`: parked at or after this time.
    pub since: Option<String>,
    /// `--until`: parked before this time.
    pub until: Option<String>,
    /// `--partition`: DLQ partitions; any of them matches.
    pub partitions: Vec<i32>,
    /// `--from-offset`: DLQ offsets from this one (inclusive).
    pub from_offset: Option<i64>,
    /// `--to-offset`: DLQ offsets up to this one (inclusive).
    pub to_offset: Option<i64>,
    /// `--record`: explicit `<partition>/<offset>` places; any of them matches.
    pub records: Vec<String>,
}

/// A validated selection. Empty lists and `None` bounds select everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Reasons, any of which matches.
    pub reasons: Vec<ErrorReason>,
    /// Endpoint ids, any of which matches.
    pub endpoints: Vec<String>,
    /// Tenant ids, any of which matches; a record without a tenant matches none.
    pub tenants: Vec<String>,
    /// Event types, any of which matches.
    pub event_types: Vec<String>,
    /// Event ids, any of which matches.
    pub event_ids: Vec<String>,
    /// Parked (`error_timestamp`) at or after this, epoch milliseconds.
    pub since_ms: Option<i64>,
    /// Parked before this, epoch milliseconds.
    pub until_ms: Option<i64>,
    /// DLQ partitions, any of which matches.
    pub partitions: Vec<i32>,
    /// First DLQ offset, inclusive.
    pub from_offset: Option<i64>,
    /// Last DLQ offset, inclusive.
    pub to_offset: Option<i64>,
    /// Explicit places, any of which matches.
    pub records: Vec<RecordRef>,
}

impl FilterSpec {
    /// Validates the selection, resolving relative times against `now_ms`.
    pub fn build(&self, now_ms: i64) -> Result<Filter, FilterError> {
        let reasons = self
            .reasons
            .iter()
            .flat_map(|r| r.split(','))
            .map(|r| {
                r.trim()
                    .parse::<ErrorReason>()
                    .map_err(|_| FilterError::UnknownReason {
                        given: r.trim().to_owned(),
                        valid: ErrorReason::ALL.map(ErrorReason::code).join(", "),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let since_ms = self
            .since
            .as_deref()
            .map(|t| TimeBound::parse("--since", t).map(|b| b.to_ms(now_ms)))
            .transpose()?;
        let until_ms = self
            .until
            .as_deref()
            .map(|t| TimeBound::parse("--until", t).map(|b| b.to_ms(now_ms)))
            .transpose()?;
        if let (Some(since), Some(until)) = (since_ms, until_ms)
            && since >= until
        {
            return Err(FilterError::EmptyTimeRange {
                since: format_ms(since),
                until: format_ms(until),
            });
        }
        for (flag, value) in [
            ("--from-offset", self.from_offset),
            ("--to-offset", self.to_offset),
        ] {
            if let Some(value) = value.filter(|v| *v < 0) {
                return Err(FilterError::Negative { flag, value });
            }
        }
        if let Some(&partition) = self.partitions.iter().find(|p| **p < 0) {
            return Err(FilterError::Negative {
                flag: "--partition",
                value: i64::from(partition),
            });
        }
        if let (Some(from), Some(to)) = (self.from_offset, self.to_offset)
            && from > to
        {
            return Err(FilterError::EmptyOffsetRange { from, to });
        }
        let records = self
            .records
            .iter()
            .flat_map(|r| r.split(','))
            .map(str::parse)
            .collect::<Result<Vec<RecordRef>, _>>()?;
        let list = |items: &[String]| -> Vec<String> {
            items
                .iter()
                .flat_map(|s| s.split(','))
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        };
        Ok(Filter {
            reasons,
            endpoints: list(&self.endpoints),
            tenants: list(&self.tenants),
            event_types: list(&self.event_types),
            event_ids: list(&self.event_ids),
            since_ms,
            until_ms,
            partitions: self.partitions.clone(),
            from_offset: self.from_offset,
            to_offset: self.to_offset,
            records,
        })
    }
}

impl Filter {
    /// Whether a record at `place` can match (partition, offset range, explicit list): the
    /// criteria that hold for records that could not be decoded too.
    pub fn matches_place(&self, place: RecordRef) -> bool {
        (self.partitions.is_empty() || self.partitions.contains(&place.partition))
            && self.from_offset.is_none_or(|from| place.offset >= from)
            && self.to_offset.is_none_or(|to| place.offset <= to)
            && (self.records.is_empty() || self.records.contains(&place))
    }

    /// Whether the record is selected.
    pub fn matches(&self, record: &DlqRecord) -> bool {
        let e = &record.envelope;
        let any = |wanted: &[String], have: Option<&str>| {
            wanted.is_empty() || have.is_some_and(|h| wanted.iter().any(|w| w == h))
        };
        self.matches_place(record.place())
            && (self.reasons.is_empty() || self.reasons.contains(&e.error_reason))
            && any(&self.endpoints, e.endpoint_id.as_deref())
            && any(&self.tenants, e.tenant_id.as_deref())
            && any(&self.event_types, e.event_type.as_deref())
            && any(&self.event_ids, Some(&e.event_id))
            && self.since_ms.is_none_or(|s| e.error_timestamp_ms >= s)
            && self.until_ms.is_none_or(|u| e.error_timestamp_ms < u)
    }

    /// Whether only the place criteria are set (undecodable records match it fully).
    pub fn is_place_only(&self) -> bool {
        self.reasons.is_empty()
            && self.endpoints.is_empty()
            && self.tenants.is_empty()
            && self.event_types.is_empty()
            && self.event_ids.is_empty()
            && self.since_ms.is_none()
            && self.until_ms.is_none()
    }

    /// The lowest offset worth reading in `partition`, from the offset criteria.
    pub fn first_offset(&self, partition: i32) -> Option<i64> {
        let explicit = self
            .records
            .iter()
            .filter(|r| r.partition == partition)
            .map(|r| r.offset)
            .min();
        match (self.from_offset, explicit) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether `partition` can hold selected records.
    pub fn wants_partition(&self, partition: i32) -> bool {
        (self.partitions.is_empty() || self.partitions.contains(&partition))
            && (self.records.is_empty() || self.records.iter().any(|r| r.partition == partition))
    }
}

#[cfg(test)]
mod tests;
