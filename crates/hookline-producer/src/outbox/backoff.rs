//! Pauses that grow: the relay's while Kafka or PostgreSQL is down, and a task's after a
//! failed publish.

use std::time::Duration;

/// A pause that doubles from `base` up to `max` each time it is taken, until reset.
#[derive(Clone, Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Starts at `base`, never more than `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff {
            base,
            max,
            next: base.min(max),
        }
    }

    /// The pause to take now; the following one is twice as long (capped).
    pub fn next_pause(&mut self) -> Duration {
        let pause = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        pause
    }

    /// Back to `base` (after a success).
    pub fn reset(&mut self) {
        self.next = self.base.min(self.max);
    }
}

/// How long a task waits after its `retry_count`-th failed publish (1 for the first):
/// `base * 2^(retry_count - 1)`, at most `max`.
pub fn task_backoff(retry_count: u32, base: Duration, max: Duration) -> Duration {
    let doublings = retry_count.saturating_sub(1).min(32);
    base.saturating_mul(1u32 << doublings.min(31)).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let pauses: Vec<u64> = (0..5)
            .map(|_| backoff.next_pause().as_millis() as u64)
            .collect();
        assert_eq!(pauses, [100, 200, 400, 500, 500]);
        backoff.reset();
        assert_eq!(backoff.next_pause(), Duration::from_millis(100));
    }

    #[test]
    fn task_backoff_grows_and_saturates() {
        let base = Duration::from_secs(1);
        let max = Duration::from_secs(300);
        assert_eq!(task_backoff(1, base, max), Duration::from_secs(1));
        assert_eq!(task_backoff(2, base, max), Duration::from_secs(2));
        assert_eq!(task_backoff(5, base, max), Duration::from_secs(16));
        assert_eq!(task_backoff(40, base, max), max);
        assert_eq!(task_backoff(u32::MAX, base, max), max);
        assert_eq!(task_backoff(0, base, max), base);
    }
}
