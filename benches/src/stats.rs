//! Summaries of repeated measurements and how they are printed.

use std::time::Duration;

/// Throughputs (operations per second) of repeated runs of one engine on one workload.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    ops_per_sec: Vec<f64>,
}

impl Samples {
    /// No samples yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a run that did `ops` operations in `elapsed`.
    pub fn push(&mut self, ops: u64, elapsed: Duration) {
        self.ops_per_sec.push(rate(ops, elapsed));
    }

    /// Number of runs recorded.
    pub fn len(&self) -> usize {
        self.ops_per_sec.len()
    }

    /// True before the first run.
    pub fn is_empty(&self) -> bool {
        self.ops_per_sec.is_empty()
    }

    /// Median throughput (mean of the middle two for an even count); 0 without samples.
    pub fn median(&self) -> f64 {
        median_of_sorted(&self.sorted())
    }

    /// Slowest run; 0 without samples.
    pub fn min(&self) -> f64 {
        self.sorted().first().copied().unwrap_or(0.0)
    }

    /// Fastest run; 0 without samples.
    pub fn max(&self) -> f64 {
        self.sorted().last().copied().unwrap_or(0.0)
    }

    fn sorted(&self) -> Vec<f64> {
        sorted(&self.ops_per_sec)
    }
}

/// A sorted copy of `v` (total order, so NaNs cannot panic the sort).
pub fn sorted(v: &[f64]) -> Vec<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// Median of an ascending slice (mean of the middle two for an even length); 0 when empty.
pub fn median_of_sorted(v: &[f64]) -> f64 {
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => f64::midpoint(v[n / 2 - 1], v[n / 2]),
    }
}

/// The `pct`-th percentile (nearest rank: the smallest value with at least `pct`% of the values
/// at or below it) of an ascending slice; 0 when empty.
pub fn percentile_of_sorted(v: &[f64], pct: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "a rank between 1 and v.len()"
    )]
    let rank = ((pct / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// What the per-batch times of one insert run look like: the figures that say whether insert
/// time stays flat as the database grows. Times are in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchSummary {
    /// Number of batches.
    pub batches: usize,
    /// Median batch time.
    pub median: f64,
    /// 99th percentile batch time (nearest rank).
    pub p99: f64,
    /// Slowest batch.
    pub max: f64,
    /// Median over the first tenth of the batches (at least one batch).
    pub first_tenth_median: f64,
    /// Median over the last tenth of the batches (at least one batch).
    pub last_tenth_median: f64,
}

impl BatchSummary {
    /// Summarizes batch times given in insertion order.
    pub fn of(times: &[f64]) -> Self {
        let tenth = (times.len() / 10).max(1).min(times.len());
        let all = sorted(times);
        BatchSummary {
            batches: times.len(),
            median: median_of_sorted(&all),
            p99: percentile_of_sorted(&all, 99.0),
            max: all.last().copied().unwrap_or(0.0),
            first_tenth_median: median_of_sorted(&sorted(&times[..tenth])),
            last_tenth_median: median_of_sorted(&sorted(&times[times.len() - tenth..])),
        }
    }

    /// Flatness: the last tenth's median batch time over the first tenth's (1.0 = flat, 2.0 =
    /// batches take twice as long at the end); 0 without batches.
    pub fn flatness(&self) -> f64 {
        if self.first_tenth_median > 0.0 {
            self.last_tenth_median / self.first_tenth_median
        } else {
            0.0
        }
    }
}

/// Operations per second; 0 for an empty interval.
pub fn rate(ops: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        #[expect(clippy::cast_precision_loss, reason = "rates are approximate")]
        let ops = ops as f64;
        ops / secs
    } else {
        0.0
    }
}

/// `1234567.8` as `1,234,568`.
pub fn thousands(x: f64) -> String {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "rates are positive and far below 2^64"
    )]
    let n = x.max(0.0).round() as u64;
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes as MiB with one decimal.
pub fn mib(bytes: u64) -> String {
    #[expect(clippy::cast_precision_loss, reason = "display only")]
    let m = bytes as f64 / f64::from(1u32 << 20);
    format!("{m:.1} MiB")
}

/// Prints the per-engine result table of one measurement: median, min and max ops/s, and the
/// ratio of Strata's median to each engine's (above 1 means Strata is faster).
pub fn print_table(what: &str, results: &[(String, Samples)]) {
    let strata = results
        .iter()
        .find(|(name, _)| name == "strata")
        .map(|(_, s)| s.median());
    println!("  {what}");
    println!(
        "    {:<8} {:>14} {:>14} {:>14} {:>13}",
        "engine", "median ops/s", "min", "max", "strata/engine"
    );
    for (name, s) in results {
        let ratio = match strata {
            Some(st) if s.median() > 0.0 => format!("{:.2}x", st / s.median()),
            _ => "-".to_string(),
        };
        println!(
            "    {:<8} {:>14} {:>14} {:>14} {:>13}",
            name,
            thousands(s.median()),
            thousands(s.min()),
            thousands(s.max()),
            ratio
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let mut s = Samples::new();
        for ops in [30, 10, 20] {
            s.push(ops, Duration::from_secs(1));
        }
        assert!((s.median() - 20.0).abs() < 1e-9);
        s.push(40, Duration::from_secs(1));
        assert!((s.median() - 25.0).abs() < 1e-9);
        assert!((s.min() - 10.0).abs() < 1e-9);
        assert!((s.max() - 40.0).abs() < 1e-9);
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        assert!((percentile_of_sorted(&v, 99.0) - 198.0).abs() < 1e-9);
        assert!((percentile_of_sorted(&v, 100.0) - 200.0).abs() < 1e-9);
        assert!((percentile_of_sorted(&v[..1], 99.0) - 1.0).abs() < 1e-9);
        assert!(percentile_of_sorted(&[], 50.0).abs() < 1e-9);
    }

    #[test]
    fn batch_summary_compares_the_last_tenth_with_the_first() {
        // 20 batches: the first two take 1 s, the last two 3 s, the rest 2 s.
        let mut times = vec![2.0; 20];
        times[0] = 1.0;
        times[1] = 1.0;
        times[18] = 3.0;
        times[19] = 3.0;
        let s = BatchSummary::of(&times);
        assert_eq!(s.batches, 20);
        assert!((s.median - 2.0).abs() < 1e-9);
        assert!((s.max - 3.0).abs() < 1e-9);
        assert!((s.flatness() - 3.0).abs() < 1e-9);
        assert!(BatchSummary::of(&[]).flatness().abs() < 1e-9);
        assert!((BatchSummary::of(&[0.5]).flatness() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1_234_567.6), "1,234,568");
    }
}
