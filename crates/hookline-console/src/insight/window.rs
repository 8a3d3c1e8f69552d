//! Time windows in epoch milliseconds: the span a page reads, and its minutes (pure).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// One minute, in milliseconds.
pub const MINUTE_MS: i64 = 60_000;

/// A span of time, `[since_ms, until_ms)` in epoch milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Window {
    /// The first millisecond in it.
    pub since_ms: i64,
    /// The first millisecond after it.
    pub until_ms: i64,
}

impl Window {
    /// The `length` before `now_ms`: `[now - length, now]` (`now` included, so a record
    /// stamped this very millisecond counts).
    pub fn last(now_ms: i64, length: Duration) -> Window {
        let length = i64::try_from(length.as_millis()).unwrap_or(i64::MAX);
        Window {
            since_ms: now_ms.saturating_sub(length),
            until_ms: now_ms.saturating_add(1),
        }
    }

    /// Whether `ms` is in it.
    pub fn contains(&self, ms: i64) -> bool {
        (self.since_ms..self.until_ms).contains(&ms)
    }
}

/// The whole minutes that cover the `length` before `now_ms`, oldest first; the last is
/// the minute now is in (still filling).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Minutes {
    first_ms: i64,
    count: usize,
}

impl Minutes {
    /// The minutes of the last `length` (at least one): as many as `length` has whole or
    /// started minutes, ending with the current one.
    pub fn last(now_ms: i64, length: Duration) -> Minutes {
        let count = length.as_millis().div_ceil(MINUTE_MS.unsigned_abs().into());
        let count = i64::try_from(count).unwrap_or(i64::MAX).max(1);
        let current = now_ms.div_euclid(MINUTE_MS).saturating_mul(MINUTE_MS);
        Minutes {
            first_ms: current.saturating_sub((count - 1).saturating_mul(MINUTE_MS)),
            count: usize::try_from(count).unwrap_or(usize::MAX),
        }
    }

    /// How many minutes.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none (never: [`Minutes::last`] makes at least one).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The start of each minute, oldest first.
    pub fn starts(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.count).map(|index| {
            let offset = i64::try_from(index).unwrap_or(i64::MAX);
            self.first_ms
                .saturating_add(offset.saturating_mul(MINUTE_MS))
        })
    }

    /// The span they cover.
    pub fn window(&self) -> Window {
        let count = i64::try_from(self.count).unwrap_or(i64::MAX);
        Window {
            since_ms: self.first_ms,
            until_ms: self
                .first_ms
                .saturating_add(count.saturating_mul(MINUTE_MS)),
        }
    }

    /// The index of the minute `ms` falls in, if one of these.
    pub fn index_of(&self, ms: i64) -> Option<usize> {
        if !self.window().contains(ms) {
            return None;
        }
        usize::try_from((ms - self.first_ms) / MINUTE_MS).ok()
    }
}

/// The time now, in epoch milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_ends_now_included() {
        let w = Window::last(1_000_000, Duration::from_secs(900));
        assert_eq!(w.since_ms, 100_000);
        assert!(w.contains(100_000));
        assert!(w.contains(1_000_000));
        assert!(!w.contains(99_999));
        assert!(!w.contains(1_000_001));
        // Saturates rather than wraps.
        let huge = Window::last(5, Duration::from_secs(u64::MAX));
        assert_eq!(huge.since_ms, 5 - i64::MAX);
    }

    #[test]
    fn an_hour_is_sixty_minutes_ending_with_the_current_one() {
        // 10:30:15.500 on some day.
        let now = 1_796_119_200_000 + 30 * MINUTE_MS + 15_500;
        let minutes = Minutes::last(now, Duration::from_secs(3600));
        assert_eq!(minutes.len(), 60);
        let starts: Vec<i64> = minutes.starts().collect();
        assert_eq!(
            *starts.last().expect("some"),
            1_796_119_200_000 + 30 * MINUTE_MS
        );
        assert_eq!(
            starts[0],
            1_796_119_200_000 + 30 * MINUTE_MS - 59 * MINUTE_MS
        );
        assert!(starts.windows(2).all(|w| w[1] - w[0] == MINUTE_MS));
        let window = minutes.window();
        assert_eq!(window.since_ms, starts[0]);
        assert_eq!(window.until_ms, starts[59] + MINUTE_MS);
        assert!(window.contains(now));
    }

    #[test]
    fn records_fall_in_their_minute() {
        let minutes = Minutes::last(10 * MINUTE_MS + 1, Duration::from_secs(180));
        assert_eq!(
            minutes.starts().collect::<Vec<_>>(),
            [8 * MINUTE_MS, 9 * MINUTE_MS, 10 * MINUTE_MS]
        );
        assert_eq!(minutes.index_of(8 * MINUTE_MS), Some(0));
        assert_eq!(minutes.index_of(9 * MINUTE_MS - 1), Some(0));
        assert_eq!(minutes.index_of(9 * MINUTE_MS), Some(1));
        assert_eq!(minutes.index_of(11 * MINUTE_MS - 1), Some(2));
        assert_eq!(minutes.index_of(11 * MINUTE_MS), None);
        assert_eq!(minutes.index_of(8 * MINUTE_MS - 1), None);
    }

    #[test]
    fn a_part_minute_counts_as_one_and_there_is_always_one() {
        assert_eq!(Minutes::last(0, Duration::from_secs(61)).len(), 2);
        assert_eq!(Minutes::last(0, Duration::ZERO).len(), 1);
        // Before the epoch the minute still starts at or before the time.
        let minutes = Minutes::last(-1, Duration::from_secs(60));
        assert_eq!(minutes.starts().collect::<Vec<_>>(), [-MINUTE_MS]);
        assert_eq!(minutes.index_of(-1), Some(0));
    }
}
