//! How long a task waits after a failed publish. The relay's own pauses while Kafka or
//! PostgreSQL is down are hookline-core's `Pauses`.

use std::time::Duration;

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
