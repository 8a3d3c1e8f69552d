//! Where archived records land in a bucket: `<prefix>/<dlq topic>/<yyyy>/<mm>/<dd>/<run>.avro`,
//! the day being the UTC day each record was parked, and `<run>` unique to one run.

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use uuid::Uuid;

/// The folder of records whose park time is not a representable instant (a timestamp
/// beyond year 9999), instead of `<yyyy>/<mm>/<dd>`.
pub const UNDATED: &str = "undated";

/// The file extension of archived objects.
pub const EXTENSION: &str = "avro";

/// The UTC day of a park time (`error_timestamp_ms`, epoch milliseconds); `None` when it
/// is out of the representable range.
pub fn park_day(error_timestamp_ms: i64) -> Option<Date> {
    Timestamp::from_millisecond(error_timestamp_ms)
        .ok()
        .map(|t| t.to_zoned(TimeZone::UTC).date())
}

/// What makes one run's object names unique: the time it started and a random id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunName(String);

impl RunName {
    /// A new run's name: `<yyyymmdd>T<hhmmss>Z-<uuid v7>` for a run started at `started`,
    /// so that runs sort by start time and two runs never share a name.
    pub fn new(started: Timestamp) -> RunName {
        RunName::with_id(started, Uuid::now_v7())
    }

    /// The name of a run started at `started` with this id.
    pub fn with_id(started: Timestamp, id: Uuid) -> RunName {
        let stamp = started.strftime("%Y%m%dT%H%M%SZ");
        RunName(format!("{stamp}-{id}"))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The key of the object holding the records of `topic` parked on `day`, written by the
/// run `run`, under `prefix` (no leading or trailing `/`; empty for a bucket's root).
pub fn object_key(prefix: &str, topic: &str, day: Option<Date>, run: &RunName) -> String {
    format!(
        "{}/{}.{EXTENSION}",
        day_folder(prefix, topic, day),
        run.as_str()
    )
}

/// The folder (a key prefix, without a trailing `/`) of the objects holding the records of
/// `topic` parked on `day`, under `prefix`: `<prefix>/<topic>/<yyyy>/<mm>/<dd>`, or
/// `<prefix>/<topic>/undated`.
pub fn day_folder(prefix: &str, topic: &str, day: Option<Date>) -> String {
    let folder = match day {
        Some(d) => format!("{:04}/{:02}/{:02}", d.year(), d.month(), d.day()),
        None => UNDATED.to_owned(),
    };
    if prefix.is_empty() {
        format!("{topic}/{folder}")
    } else {
        format!("{prefix}/{topic}/{folder}")
    }
}

/// Whether a listed key is an archive object (`.avro`), not another file in the bucket.
pub fn is_archive_key(key: &str) -> bool {
    key.rsplit('/')
        .next()
        .is_some_and(|name| name.len() > EXTENSION.len() + 1 && name.ends_with(".avro"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        text.parse::<Timestamp>()
            .expect("a timestamp")
            .as_millisecond()
    }

    fn run() -> RunName {
        let id = Uuid::parse_str("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b").expect("uuid");
        RunName::with_id("2026-12-02T00:30:05Z".parse().expect("time"), id)
    }

    #[test]
    fn the_day_is_the_utc_day_of_the_park_time() {
        let last_ms = ms("2026-12-01T23:59:59.999Z");
        assert_eq!(park_day(last_ms), Some(Date::constant(2026, 12, 1)));
        assert_eq!(park_day(last_ms + 1), Some(Date::constant(2026, 12, 2)));
        // 23:30 in New York on the 1st is already the 2nd in UTC.
        assert_eq!(
            park_day(ms("2026-12-01T23:30:00-05:00")),
            Some(Date::constant(2026, 12, 2))
        );
        assert_eq!(park_day(0), Some(Date::constant(1970, 1, 1)));
        assert_eq!(park_day(-1), Some(Date::constant(1969, 12, 31)));
        assert_eq!(park_day(i64::MAX), None);
        assert_eq!(park_day(i64::MIN), None);
    }

    #[test]
    fn keys_are_prefix_topic_and_day() {
        let day = park_day(ms("2026-01-09T10:00:00Z"));
        let name = "20261202T003005Z-0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.avro";
        assert_eq!(
            object_key("archive/prod", "webhook-events.dlq", day, &run()),
            format!("archive/prod/webhook-events.dlq/2026/01/09/{name}")
        );
        assert_eq!(
            object_key("", "t.dlq", day, &run()),
            format!("t.dlq/2026/01/09/{name}")
        );
        assert_eq!(
            object_key("p", "t.dlq", None, &run()),
            format!("p/t.dlq/undated/{name}")
        );
        assert_eq!(
            day_folder("archive/prod", "webhook-events.dlq", day),
            "archive/prod/webhook-events.dlq/2026/01/09"
        );
        assert_eq!(day_folder("", "t.dlq", None), "t.dlq/undated");
    }

    #[test]
    fn two_runs_never_share_a_name_and_sort_by_start() {
        let at: Timestamp = "2026-12-02T00:30:05Z".parse().expect("time");
        let (a, b) = (RunName::new(at), RunName::new(at));
        assert_ne!(a, b);
        let later = RunName::new("2026-12-02T00:30:06Z".parse().expect("time"));
        assert!(later.as_str() > a.as_str() && later.as_str() > b.as_str());
        assert!(
            a.as_str().starts_with("20261202T003005Z-"),
            "{}",
            a.as_str()
        );
    }

    #[test]
    fn only_avro_objects_are_archives() {
        assert!(is_archive_key("p/t.dlq/2026/01/09/x.avro"));
        assert!(is_archive_key("x.avro"));
        assert!(!is_archive_key("p/t.dlq/2026/01/09/x.avro.tmp"));
        assert!(!is_archive_key("p/.avro"));
        assert!(!is_archive_key("p/readme.txt"));
    }
}
