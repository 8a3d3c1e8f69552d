//! Percentiles of a set of measurements (latencies, lateness), by nearest rank.

use serde::Serialize;

/// p50, p99 and max of some durations, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// How many values.
    pub count: u64,
    /// The median.
    pub p50_ms: f64,
    /// The 99th percentile.
    pub p99_ms: f64,
    /// The largest value.
    pub max_ms: f64,
}

impl Percentiles {
    /// Of `values_us`, in microseconds (sorted in place); zeros when there are none.
    pub fn of_micros(values_us: &mut [i64]) -> Self {
        values_us.sort_unstable();
        let ms = |us: i64| us as f64 / 1000.0;
        match values_us.last() {
            None => Percentiles::default(),
            Some(&max) => Percentiles {
                count: values_us.len() as u64,
                p50_ms: ms(rank(values_us, 50)),
                p99_ms: ms(rank(values_us, 99)),
                max_ms: ms(max),
            },
        }
    }
}

/// The nearest-rank `percent`-th percentile of sorted, non-empty `values`.
fn rank(values: &[i64], percent: usize) -> i64 {
    // ceil(p/100 × n), from 1; at least the first.
    let n = values.len();
    let index = (percent * n).div_ceil(100).clamp(1, n) - 1;
    values[index]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut values: Vec<i64> = (1..=100).rev().map(|ms| ms * 1000).collect();
        let p = Percentiles::of_micros(&mut values);
        assert_eq!(p.count, 100);
        assert_eq!((p.p50_ms, p.p99_ms, p.max_ms), (50.0, 99.0, 100.0));
        let one = Percentiles::of_micros(&mut [-2500]);
        assert_eq!((one.p50_ms, one.p99_ms, one.max_ms), (-2.5, -2.5, -2.5));
        assert_eq!(Percentiles::of_micros(&mut []), Percentiles::default());
    }
}
