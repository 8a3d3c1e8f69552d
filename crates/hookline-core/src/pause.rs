//! Pauses between tries of an operation that waits out an outage (the registry, Kafka,
//! PostgreSQL): they grow from a first pause to a longest one, and each has a random part,
//! so that the processes and tasks that met the same outage do not all try again at the same
//! moment. Built on `backon`'s exponential backoff with jitter.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// Growing pauses: the n-th is `first * 2^n`, at most `longest`, plus a random part of up
/// to as much again. They never run out; [`Pauses::reset`] starts them over.
#[derive(Debug)]
pub struct Pauses {
    builder: ExponentialBuilder,
    longest: Duration,
    pauses: ExponentialBackoff,
}

impl Pauses {
    /// Pauses from `first` growing to `longest` (before the random part).
    pub fn new(first: Duration, longest: Duration) -> Self {
        let builder = ExponentialBuilder::new()
            .with_min_delay(first.min(longest))
            .with_max_delay(longest)
            .with_jitter()
            .without_max_times();
        Pauses {
            builder,
            longest,
            pauses: builder.build(),
        }
    }

    /// The pause to take now.
    pub fn next_pause(&mut self) -> Duration {
        self.pauses.next().unwrap_or(self.longest)
    }

    /// Back to the first pause (after a success).
    pub fn reset(&mut self) {
        self.pauses = self.builder.build();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn pauses_double_up_to_the_longest_with_up_to_as_much_again_at_random() {
        let mut pauses = Pauses::new(100 * MS, 500 * MS);
        for expected in [100, 200, 400, 500, 500, 500] {
            let pause = pauses.next_pause();
            let least = expected * MS;
            assert!(
                least <= pause && pause < 2 * least,
                "{pause:?} for {least:?}"
            );
        }
        pauses.reset();
        let pause = pauses.next_pause();
        assert!(100 * MS <= pause && pause < 200 * MS, "{pause:?}");
    }

    #[test]
    fn two_series_do_not_keep_in_step() {
        let series = || {
            let mut pauses = Pauses::new(100 * MS, Duration::from_secs(10));
            (0..8).map(|_| pauses.next_pause()).collect::<Vec<_>>()
        };
        assert_ne!(series(), series());
    }

    #[test]
    fn a_first_pause_past_the_longest_is_the_longest() {
        let pause = Pauses::new(Duration::from_secs(9), Duration::from_secs(1)).next_pause();
        assert!(pause >= Duration::from_secs(1) && pause < Duration::from_secs(2));
    }
}
