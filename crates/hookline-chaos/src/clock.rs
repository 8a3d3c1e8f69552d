//! One clock per scenario: seconds since its start, for arrivals, publishes, faults and the
//! DLQ's epoch timestamps alike.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The scenario's clock.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
    start_epoch_ms: i64,
}

impl Clock {
    /// A clock starting now.
    pub fn start() -> Self {
        Clock {
            start: Instant::now(),
            start_epoch_ms: epoch_ms(),
        }
    }

    /// Seconds since the start.
    pub fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// An epoch time in milliseconds (a DLQ envelope's), as seconds since the start.
    pub fn since_start_of_epoch_ms(&self, ms: i64) -> f64 {
        (ms - self.start_epoch_ms) as f64 / 1000.0
    }
}

/// Milliseconds since the Unix epoch.
pub fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_times_map_onto_the_clock() {
        let clock = Clock::start();
        let now = clock.since_start_of_epoch_ms(epoch_ms());
        assert!((-0.01..1.0).contains(&now), "{now}");
        assert!((clock.since_start_of_epoch_ms(clock.start_epoch_ms + 1500) - 1.5).abs() < 1e-9);
        assert!(clock.now() >= 0.0);
    }
}
