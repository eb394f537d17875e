//! Percentiles, with one rule for every figure the project prints: radard's
//! run summary, its status histogram (diagnostics link, console, radarctl)
//! and the benchmarks.
//!
//! The rule is the **nearest rank**: the p-th percentile of `n` values sorted
//! ascending is the value of rank `ceil(p/100 * n)` (1-based, at least 1).
//! It is always one of the observed values, so no percentile exceeds the
//! maximum, and p100 is the maximum.
//!
//! For a histogram the rank is found the same way over the bin counts; the
//! value reported is the upper edge of the bin that holds it, capped at the
//! largest value observed (a bin's edge can lie above every value in it).
//!
//! [`LatencyStats`] is the row a benchmark prints and writes to JSON.

use serde::Serialize;

/// The 1-based nearest rank of quantile `q` (0..=1) among `n` values:
/// `ceil(q * n)`, at least 1 and at most `n`. `n` must be at least 1.
pub fn nearest_rank(n: usize, q: f64) -> usize {
    let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
    let exact = q * n as f64;
    let mut rank = exact as usize;
    if (rank as f64) < exact {
        rank += 1;
    }
    rank.clamp(1, n.max(1))
}

/// The value at quantile `q` (0..=1) of `sorted` (ascending), by nearest
/// rank; `None` when there are no values.
pub fn percentile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    Some(sorted[nearest_rank(sorted.len(), q) - 1])
}

/// The figures every latency table prints: p50, p99, p99.9 and the max of
/// `samples` values.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles<T> {
    pub samples: usize,
    pub p50: T,
    pub p99: T,
    pub p999: T,
    pub max: T,
}

impl<T: Copy> Percentiles<T> {
    /// The figures of values sorted ascending; `None` when there are none.
    pub fn of_sorted(sorted: &[T]) -> Option<Self> {
        Some(Percentiles {
            samples: sorted.len(),
            p50: percentile(sorted, 0.50)?,
            p99: percentile(sorted, 0.99)?,
            p999: percentile(sorted, 0.999)?,
            max: *sorted.last()?,
        })
    }

    /// The same figures in another unit (say ns to ms).
    pub fn map<U>(self, f: impl Fn(T) -> U) -> Percentiles<U> {
        Percentiles {
            samples: self.samples,
            p50: f(self.p50),
            p99: f(self.p99),
            p999: f(self.p999),
            max: f(self.max),
        }
    }
}

/// The value at quantile `q` of a histogram, by nearest rank over its
/// counts: the upper edge of the bin holding that rank (`upper_edge(i)` for
/// bin `i`; infinite for an open last bin), never more than `observed_max`,
/// the largest value that went into the histogram. `None` when it is empty.
pub fn histogram_percentile(
    counts: &[u64],
    upper_edge: impl Fn(usize) -> f64,
    q: f64,
    observed_max: f64,
) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let want = nearest_rank_u64(total, q);
    let mut seen = 0u64;
    for (i, &n) in counts.iter().enumerate() {
        seen += n;
        if seen >= want {
            return Some(upper_edge(i).min(observed_max));
        }
    }
    Some(observed_max)
}

/// One benchmark row: per-frame times in microseconds, their mean,
/// nearest-rank percentiles and max, and the throughput of the timed loop.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LatencyStats {
    pub frames: usize,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// Frames per second over `wall_s` (0 when no wall time is given).
    pub throughput_fps: f64,
}

impl LatencyStats {
    /// The row of `samples_us` (any order); `wall_s` is the wall time of the
    /// whole timed loop, for the throughput. With no samples every figure
    /// but the count is NaN.
    pub fn from_samples(samples_us: &[f64], wall_s: f64) -> Self {
        let mut sorted = samples_us.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let p = Percentiles::of_sorted(&sorted).unwrap_or(Percentiles {
            samples: 0,
            p50: f64::NAN,
            p99: f64::NAN,
            p999: f64::NAN,
            max: f64::NAN,
        });
        LatencyStats {
            frames: n,
            mean_us: if n == 0 {
                f64::NAN
            } else {
                sorted.iter().sum::<f64>() / n as f64
            },
            p50_us: p.p50,
            p99_us: p.p99,
            p999_us: p.p999,
            max_us: p.max,
            throughput_fps: if wall_s > 0.0 { n as f64 / wall_s } else { 0.0 },
        }
    }
}

/// [`nearest_rank`] for counts that may not fit a `usize` on small targets.
fn nearest_rank_u64(n: u64, q: f64) -> u64 {
    let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
    let exact = q * n as f64;
    let mut rank = exact as u64;
    if (rank as f64) < exact {
        rank += 1;
    }
    rank.clamp(1, n.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The textbook worked example of the nearest-rank method: the values
    /// 15, 20, 35, 40, 50 give p5 = 15, p30 = 20, p40 = 20, p50 = 35 and
    /// p100 = 50 (ranks ceil(0.05*5) = 1, ceil(1.5) = 2, 2, ceil(2.5) = 3, 5).
    #[test]
    fn worked_example() {
        let v = [15, 20, 35, 40, 50];
        assert_eq!(percentile(&v, 0.05), Some(15));
        assert_eq!(percentile(&v, 0.30), Some(20));
        assert_eq!(percentile(&v, 0.40), Some(20));
        assert_eq!(percentile(&v, 0.50), Some(35));
        assert_eq!(percentile(&v, 1.00), Some(50));
        assert_eq!(percentile(&v, 0.0), Some(15));
    }

    /// 1000 values 1..=1000: p50 is the 500th, p99 the 990th, p99.9 the
    /// 999th; with 100 values p99.9 is the largest (rank ceil(99.9) = 100).
    #[test]
    fn tail_ranks() {
        let v: [u32; 1000] = std::array::from_fn(|i| i as u32 + 1);
        let p = Percentiles::of_sorted(&v).unwrap();
        assert_eq!(
            (p.samples, p.p50, p.p99, p.p999, p.max),
            (1000, 500, 990, 999, 1000)
        );
        let p = Percentiles::of_sorted(&v[..100]).unwrap();
        assert_eq!((p.p50, p.p99, p.p999, p.max), (50, 99, 100, 100));
        assert_eq!(Percentiles::<u32>::of_sorted(&[]), None);
        assert_eq!(percentile::<u8>(&[], 0.5), None);
    }

    #[test]
    fn ranks_are_clamped() {
        assert_eq!(nearest_rank(1, 0.999), 1);
        assert_eq!(nearest_rank(10, -1.0), 1);
        assert_eq!(nearest_rank(10, 2.0), 10);
        assert_eq!(nearest_rank(10, f64::NAN), 1);
        assert_eq!(nearest_rank(3, 1.0 / 3.0), 1);
    }

    /// Bins [0,10) [10,20) [20,40) [40,inf): counts 5, 3, 2, 0. p50 is
    /// rank 5, in the first bin (edge 10); p80 rank 8 in the second (20);
    /// p90 rank 9 in the third, whose edge 40 lies above the largest value
    /// seen (23), so 23.
    #[test]
    fn histogram_worked_example() {
        let counts = [5, 3, 2, 0];
        let edges = [10.0, 20.0, 40.0, f64::INFINITY];
        let at = |q| histogram_percentile(&counts, |i| edges[i], q, 23.0);
        assert_eq!(at(0.5), Some(10.0));
        assert_eq!(at(0.8), Some(20.0));
        assert_eq!(at(0.9), Some(23.0));
        assert_eq!(at(1.0), Some(23.0));
        assert_eq!(histogram_percentile(&[0, 0], |_| 1.0, 0.5, 0.0), None);
    }

    /// A value in the open last bin: the percentile is the max observed,
    /// never infinity; and never above the max for any q.
    #[test]
    fn histogram_never_exceeds_the_max() {
        let counts = [0, 0, 1, 0, 7];
        let edges = [1.0, 2.0, 4.0, 8.0, f64::INFINITY];
        for k in 0..=1000 {
            let q = k as f64 / 1000.0;
            let v = histogram_percentile(&counts, |i| edges[i], q, 22.5).unwrap();
            assert!(v <= 22.5, "q {q}: {v}");
        }
        assert_eq!(
            histogram_percentile(&counts, |i| edges[i], 0.99, 22.5),
            Some(22.5)
        );
        assert_eq!(
            histogram_percentile(&counts, |i| edges[i], 0.1, 22.5),
            Some(4.0)
        );
    }

    #[test]
    fn latency_stats_row() {
        let s = LatencyStats::from_samples(&[50.0, 15.0, 40.0, 20.0, 35.0], 0.5);
        assert_eq!((s.frames, s.p50_us, s.max_us), (5, 35.0, 50.0));
        assert_eq!((s.mean_us, s.throughput_fps), (32.0, 10.0));
        let empty = LatencyStats::from_samples(&[], 0.0);
        assert_eq!(empty.frames, 0);
        assert!(empty.p50_us.is_nan() && empty.max_us.is_nan());
    }
}
