//! Times given on the command line: RFC 3339, a date, `now`, or a duration back from now.
//! Durations are jiff's, as `--ttl`'s: the friendly format (`30m`, `2h 30m`, `1.5h`, `7d`,
//! `1w`) or ISO 8601 (`PT15M`, `P7D`), days and weeks taken as 24 hours and 7 days. What
//! jiff leaves to its caller is written here: `now`, a trailing `ago` (it means what a bare
//! duration means), and refusing a duration that counts forward (`-2h`) or that reads as a
//! clock time (`12:00:00`, which jiff takes for 12 hours).

use std::time::Duration;

use jiff::{SignedDuration, Span, SpanRelativeTo, Timestamp};

use super::FilterError;

/// A time bound as the user wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeBound {
    /// An absolute time, epoch milliseconds.
    At(i64),
    /// This long before now.
    Ago(Duration),
}

impl TimeBound {
    /// Parses `text`, given for `flag` (named in the error): an RFC 3339 time
    /// (`2024-05-01T12:00:00Z`, `2024-05-01T14:00:00+02:00`), a date (`2024-05-01`, midnight
    /// UTC), `now`, or a duration meaning that long ago (`30m`, `2h 30m`, `7d`, `PT15M`; an
    /// optional ` ago` is accepted).
    pub fn parse(flag: &'static str, text: &str) -> Result<TimeBound, FilterError> {
        let trimmed = text.trim();
        let invalid = |source| FilterError::InvalidTime {
            flag,
            value: text.to_owned(),
            source,
        };
        if trimmed == "now" {
            return Ok(TimeBound::Ago(Duration::ZERO));
        }
        let not_ago = match parse_ago(trimmed) {
            Ok(duration) => return Ok(TimeBound::Ago(duration)),
            Err(error) => error,
        };
        match trimmed.parse::<Timestamp>() {
            Ok(ts) => Ok(TimeBound::At(ts.as_millisecond())),
            Err(error) => match trimmed.parse::<jiff::civil::Date>() {
                Ok(date) => date
                    .to_zoned(jiff::tz::TimeZone::UTC)
                    .map(|z| TimeBound::At(z.timestamp().as_millisecond()))
                    .map_err(|e| invalid(Some(e))),
                // The cause shown is that of the form the text looks like.
                Err(_) if looks_absolute(trimmed) => Err(invalid(Some(error))),
                Err(_) => Err(invalid(not_ago)),
            },
        }
    }

    /// The bound in epoch milliseconds, relative bounds counted back from `now_ms`.
    pub fn to_ms(self, now_ms: i64) -> i64 {
        match self {
            TimeBound::At(ms) => ms,
            TimeBound::Ago(d) => {
                now_ms.saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            }
        }
    }
}

/// A duration back from now. `Err(None)` for a clock time or a duration that counts forward,
/// which jiff parses but which mean something else here.
fn parse_ago(text: &str) -> Result<Duration, Option<jiff::Error>> {
    if text.contains(':') {
        return Err(None);
    }
    let text = text.strip_suffix("ago").map_or(text, str::trim_end);
    // A `SignedDuration` holds hours, minutes and seconds past a `Span`'s range (which
    // stops at 19,998 years); a `Span` also holds days and weeks.
    let signed = match text.parse::<SignedDuration>() {
        Ok(signed) => signed,
        Err(_) => text
            .parse::<Span>()
            .and_then(|span| span.to_duration(SpanRelativeTo::days_are_24_hours()))
            .map_err(Some)?,
    };
    Duration::try_from(signed).map_err(|_| None)
}

/// Whether `text` is written like a date or a time of day (`2024-05-01`, `12:00`).
fn looks_absolute(text: &str) -> bool {
    text.contains(':')
        || text
            .split_once('-')
            .is_some_and(|(year, _)| year.len() >= 4 && year.bytes().all(|b| b.is_ascii_digit()))
}

/// Epoch milliseconds as RFC 3339 UTC with milliseconds, e.g. `2024-05-01T12:00:00.123Z`.
pub fn format_ms(ms: i64) -> String {
    match Timestamp::from_millisecond(ms) {
        Ok(ts) => format!("{ts:.3}"),
        Err(_) => format!("{ms} ms since the epoch"),
    }
}

/// The current time, epoch milliseconds.
pub fn now_ms() -> i64 {
    Timestamp::now().as_millisecond()
}

/// Parses RFC 3339 back to epoch milliseconds.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    text.parse::<Timestamp>().ok().map(|ts| ts.as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_714_564_800_000; // 2024-05-01T12:00:00Z

    fn ms(flag: &'static str, text: &str) -> Result<i64, FilterError> {
        TimeBound::parse(flag, text).map(|b| b.to_ms(NOW))
    }

    fn ok(flag: &'static str, text: &str) -> Option<i64> {
        ms(flag, text).ok()
    }

    #[test]
    fn absolute_times() {
        assert_eq!(ok("--since", "2024-05-01T12:00:00Z"), Some(NOW));
        assert_eq!(ok("--since", "2024-05-01T14:00:00+02:00"), Some(NOW));
        assert_eq!(ok("--since", "2024-05-01T12:00:00.250Z"), Some(NOW + 250));
        assert_eq!(ok("--since", "2024-05-01"), Some(NOW - 12 * 3_600_000));
    }

    #[test]
    fn relative_times() {
        assert_eq!(ok("--since", "2h"), Some(NOW - 2 * 3_600_000));
        assert_eq!(ok("--since", "30m"), Some(NOW - 30 * 60_000));
        assert_eq!(ok("--since", "7d ago"), Some(NOW - 7 * 86_400_000));
        assert_eq!(ok("--since", "1w"), Some(NOW - 7 * 86_400_000));
        assert_eq!(ok("--until", "now"), Some(NOW));
        assert_eq!(ok("--until", "500ms"), Some(NOW - 500));
    }

    /// What the hand-written parser took before jiff still reads the same.
    #[test]
    fn the_earlier_relative_forms_still_read() {
        for (text, ms) in [
            ("0ms", 0),
            ("45s", 45_000),
            ("15min", 15 * 60_000),
            ("7 d", 7 * 86_400_000),
            ("2h ago", 2 * 3_600_000),
            ("2hago", 2 * 3_600_000),
            (" 3w ", 21 * 86_400_000),
            ("7304484d", 7_304_484 * 86_400_000),
        ] {
            assert_eq!(ok("--since", text), Some(NOW - ms), "{text}");
        }
    }

    /// jiff's friendly and ISO 8601 forms.
    #[test]
    fn jiff_durations() {
        for (text, ms) in [
            ("2h 30m", 9_000_000),
            ("1h30m", 5_400_000),
            ("1.5h", 5_400_000),
            ("1d 12h", 36 * 3_600_000),
            ("2 hours", 2 * 3_600_000),
            ("2 days ago", 2 * 86_400_000),
            ("PT15M", 15 * 60_000),
            ("P7D", 7 * 86_400_000),
            ("P1DT2H", 26 * 3_600_000),
            ("P1W", 7 * 86_400_000),
            ("2562047788015215h", i64::MAX),
        ] {
            let expected = NOW.saturating_sub(ms);
            assert_eq!(ok("--since", text), Some(expected), "{text}");
        }
    }

    #[test]
    fn malformed_times_name_the_flag() {
        for bad in [
            "",
            "yesterday",
            "2h30",
            "12x",
            "2024-13-01",
            "2024-05-01 noon",
            // Months and years have no fixed length.
            "1mo",
            "P1Y",
            // Counting forward, or a clock time (jiff reads `12:00:00` as 12 hours).
            "-2h",
            "12:00:00",
            "100000000d",
        ] {
            let error = ms("--until", bad).expect_err(bad);
            assert!(
                matches!(
                    error,
                    FilterError::InvalidTime {
                        flag: "--until",
                        ..
                    }
                ),
                "{bad}: {error:?}"
            );
            let text = error.to_string();
            assert!(text.starts_with("--until"), "{text}");
            assert!(text.contains("2h 30m, 7d, 1w, PT15M"), "{text}");
        }
    }

    /// The cause is that of the form the text looks like.
    #[test]
    fn the_cause_fits_what_was_meant() {
        let cause = |text: &str| {
            let error = ms("--since", text).expect_err(text);
            std::error::Error::source(&error).map(ToString::to_string)
        };
        let duration = cause("12x").expect("a cause");
        assert!(duration.contains("unit designator"), "{duration}");
        let date = cause("2024-13-01").expect("a cause");
        assert!(date.contains("month"), "{date}");
        assert_eq!(cause("-2h"), None);
    }

    #[test]
    fn formats_round_trip() {
        assert_eq!(format_ms(NOW + 7), "2024-05-01T12:00:00.007Z");
        assert_eq!(parse_rfc3339_ms(&format_ms(NOW + 7)), Some(NOW + 7));
    }
}
