//! `--expires-at` and `--ttl` of `hookline publish`: the event's deadline, after which no
//! delivery is attempted (parked as `expired`).

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::bail;
use jiff::{SignedDuration, Timestamp};

/// The deadline flags.
#[derive(Debug, Default, clap::Args)]
pub struct DeadlineArgs {
    /// Deadline of the event, RFC 3339 (`2026-12-01T18:00:00Z`): a delivery not made by
    /// then is not attempted again and is parked with reason `expired`. Must be in the
    /// future. A full event on stdin keeps its own `expires_at_ms`.
    #[arg(long, value_name = "RFC3339", value_parser = parse_time, conflicts_with = "ttl")]
    expires_at: Option<Timestamp>,
    /// Deadline as a time from now, e.g. `30s`, `15m`, `2h`, `1h 30m`; as --expires-at.
    #[arg(long, value_name = "DURATION", value_parser = parse_ttl)]
    ttl: Option<SignedDuration>,
}

impl DeadlineArgs {
    /// The deadline in epoch milliseconds, a `--ttl` counted from `now_ms`; `None` without
    /// either flag.
    pub fn expires_at_ms(&self, now_ms: i64) -> anyhow::Result<Option<i64>> {
        match (self.expires_at, self.ttl) {
            (Some(at), _) => Ok(Some(at.as_millisecond())),
            (None, Some(ttl)) => {
                let ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
                Ok(Some(now_ms.saturating_add(ms)))
            }
            (None, None) => Ok(None),
        }
    }

    /// [`expires_at_ms`](Self::expires_at_ms) from the current time.
    pub fn now(&self) -> anyhow::Result<Option<i64>> {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        self.expires_at_ms(now_ms)
    }
}

fn parse_time(text: &str) -> anyhow::Result<Timestamp> {
    text.trim().parse::<Timestamp>().map_err(|error| {
        anyhow::anyhow!("not an RFC 3339 time with an offset (e.g. 2026-12-01T18:00:00Z): {error}")
    })
}

fn parse_ttl(text: &str) -> anyhow::Result<SignedDuration> {
    let ttl = text
        .trim()
        .parse::<SignedDuration>()
        .map_err(|error| anyhow::anyhow!("not a duration (e.g. 30s, 15m, 2h, 1h 30m): {error}"))?;
    if ttl <= SignedDuration::ZERO {
        bail!("must be positive");
    }
    Ok(ttl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_at_and_ttl() {
        let at = DeadlineArgs {
            expires_at: Some(parse_time("2026-12-01T18:00:00Z").expect("valid")),
            ttl: None,
        };
        assert_eq!(at.expires_at_ms(0).expect("ok"), Some(1_796_148_000_000));
        let ttl = DeadlineArgs {
            expires_at: None,
            ttl: Some(parse_ttl("1h 30m").expect("valid")),
        };
        assert_eq!(
            ttl.expires_at_ms(1_000).expect("ok"),
            Some(1_000 + 5_400_000)
        );
        assert_eq!(parse_ttl("250ms").expect("valid").as_millis(), 250);
        assert_eq!(DeadlineArgs::default().expires_at_ms(5).expect("ok"), None);
        assert!(parse_ttl("0s").is_err());
        assert!(parse_ttl("-5m").is_err());
        assert!(parse_ttl("soon").is_err());
        assert!(parse_time("2026-12-01").is_err());
        assert!(parse_time("2026-12-01T18:00:00+02:00").is_ok());
    }
}
