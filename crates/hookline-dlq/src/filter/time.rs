//! Times given on the command line: RFC 3339, a date, or relative to now (`30m`, `2h`, `7d`).

use std::time::Duration;

use jiff::Timestamp;

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
    /// UTC), `now`, or a relative time `<n><unit>` with unit `ms`, `s`, `m`, `h`, `d` or `w`,
    /// meaning that long ago (an optional ` ago` is accepted).
    pub fn parse(flag: &'static str, text: &str) -> Result<TimeBound, FilterError> {
        let trimmed = text.trim();
        let invalid = |source| FilterError::InvalidTime {
            flag,
            value: text.to_owned(),
            source,
        };
        if trimmed.is_empty() {
            return Err(invalid(None));
        }
        if trimmed == "now" {
            return Ok(TimeBound::Ago(Duration::ZERO));
        }
        let relative = trimmed.strip_suffix("ago").unwrap_or(trimmed).trim_end();
        if relative.starts_with(|c: char| c.is_ascii_digit())
            && let Some(duration) = parse_relative(relative)
        {
            return Ok(TimeBound::Ago(duration));
        }
        match trimmed.parse::<Timestamp>() {
            Ok(ts) => Ok(TimeBound::At(ts.as_millisecond())),
            Err(error) => match trimmed.parse::<jiff::civil::Date>() {
                Ok(date) => date
                    .to_zoned(jiff::tz::TimeZone::UTC)
                    .map(|z| TimeBound::At(z.timestamp().as_millisecond()))
                    .map_err(|e| invalid(Some(e))),
                Err(_) => Err(invalid(Some(error))),
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

fn parse_relative(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let factor_ms: u64 = match unit.trim() {
        "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => return None,
    };
    n.checked_mul(factor_ms).map(Duration::from_millis)
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

    #[test]
    fn malformed_times_name_the_flag() {
        for bad in [
            "",
            "yesterday",
            "2h30",
            "12x",
            "2024-13-01",
            "2024-05-01 noon",
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
            assert!(error.to_string().starts_with("--until"), "{error}");
        }
    }

    #[test]
    fn formats_round_trip() {
        assert_eq!(format_ms(NOW + 7), "2024-05-01T12:00:00.007Z");
        assert_eq!(parse_rfc3339_ms(&format_ms(NOW + 7)), Some(NOW + 7));
    }
}
