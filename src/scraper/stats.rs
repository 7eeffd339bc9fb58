//! Counters of the scrape loops, shared with whoever reports on them (the scraper benchmark):
//! ticks, missed ticks, failed scrapes, and a histogram of scrape lag (how late a scrape
//! started against its schedule). Lock-free, so a thousand loops never wait on each other.

use std::sync::atomic::{AtomicU64, Ordering};

/// Lags below this many milliseconds each get their own bucket.
const LINEAR: u64 = 64;
/// Buckets per power of two above `LINEAR` (relative error under 1/16).
const SUB: u64 = 16;
/// Enough buckets for any u64.
const BUCKETS: usize = (LINEAR + (64 - 6) * SUB) as usize;

/// What the scrape loops did since they started.
#[derive(Debug)]
pub struct ScrapeStats {
    ticks: AtomicU64,
    missed_ticks: AtomicU64,
    failures: AtomicU64,
    lag: Vec<AtomicU64>,
}

impl Default for ScrapeStats {
    fn default() -> Self {
        Self {
            ticks: AtomicU64::new(0),
            missed_ticks: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            lag: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl ScrapeStats {
    /// Notes one started scrape, `lag_ms` after its scheduled start; `missed` when one
    /// scheduled tick was dropped before it (see `tick_after_missing` for several).
    pub fn tick(&self, lag_ms: u64, missed: bool) {
        self.tick_after_missing(lag_ms, u64::from(missed));
    }

    /// Notes one started scrape, `lag_ms` after its scheduled start, and the `missed`
    /// scheduled ticks that were dropped (never run) because the loop was that late.
    pub fn tick_after_missing(&self, lag_ms: u64, missed: u64) {
        self.ticks.fetch_add(1, Ordering::Relaxed);
        if missed > 0 {
            self.missed_ticks.fetch_add(missed, Ordering::Relaxed);
        }
        self.lag[bucket(lag_ms)].fetch_add(1, Ordering::Relaxed);
    }

    /// Notes a scrape that ended in an error sample.
    pub fn failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Scrapes started.
    pub fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }

    /// Scheduled ticks that never ran because their loop was late (a stall of several
    /// intervals counts each tick it dropped).
    pub fn missed_ticks(&self) -> u64 {
        self.missed_ticks.load(Ordering::Relaxed)
    }

    /// Scrapes that ended in an error sample.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The lag, in milliseconds, that `q` (0–1) of the scrapes stayed within (the upper bound
    /// of its bucket: exact below 64 ms, within 1/16 above); `None` before the first tick.
    pub fn lag_quantile_ms(&self, q: f64) -> Option<u64> {
        let counts: Vec<u64> = self.lag.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        // The rank of the quantile, 1-based: the smallest count covering q of the total.
        // (The epsilon keeps 0.99 × 1000 from rounding up to a rank past 990.)
        let rank = ((q.clamp(0.0, 1.0) * total as f64 - 1e-9).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(upper(i));
            }
        }
        Some(upper(BUCKETS - 1))
    }

    /// The 99th percentile of scrape lag, in milliseconds.
    pub fn lag_p99_ms(&self) -> Option<u64> {
        self.lag_quantile_ms(0.99)
    }
}

fn bucket(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let exp = 63 - u64::from(v.leading_zeros()); // ≥ 6
    let sub = (v >> (exp - 4)) & (SUB - 1);
    (LINEAR + (exp - 6) * SUB + sub) as usize
}

/// The largest value in bucket `i`.
fn upper(i: usize) -> u64 {
    let i = i as u64;
    if i < LINEAR {
        return i;
    }
    let exp = (i - LINEAR) / SUB + 6;
    let sub = (i - LINEAR) % SUB;
    let start = (SUB + sub) << (exp - 4);
    start + ((1u64 << (exp - 4)) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_their_values_and_cover_every_u64() {
        for v in [
            0,
            1,
            63,
            64,
            65,
            100,
            1_000,
            4_095,
            4_096,
            15_000,
            u64::MAX / 3,
            u64::MAX,
        ] {
            let b = bucket(v);
            assert!(b < BUCKETS, "{v}");
            assert!(upper(b) >= v, "{v} above its bucket's bound {}", upper(b));
            assert!(
                b == 0 || upper(b - 1) < v,
                "{v} belongs to an earlier bucket"
            );
            // Relative error of the bound stays under 1/16.
            assert!(upper(b) - v <= v / 16, "{v}: {}", upper(b));
        }
    }

    #[test]
    fn p99_reads_the_slowest_percent() {
        let s = ScrapeStats::default();
        assert_eq!(s.lag_p99_ms(), None);
        for _ in 0..990 {
            s.tick(3, false);
        }
        for _ in 0..10 {
            s.tick(20_000, true);
        }
        // Exactly 99 % within 3 ms.
        assert_eq!(s.lag_p99_ms(), Some(3));
        s.tick(20_000, true);
        let p99 = s.lag_p99_ms().unwrap();
        assert!((20_000..=21_250).contains(&p99), "{p99}");
        assert_eq!((s.ticks(), s.missed_ticks(), s.failures()), (1001, 11, 0));
        s.failure();
        assert_eq!(s.failures(), 1);
    }

    #[test]
    fn a_stall_adds_every_tick_it_dropped() {
        let s = ScrapeStats::default();
        s.tick_after_missing(2, 0);
        s.tick_after_missing(45_000, 3);
        assert_eq!((s.ticks(), s.missed_ticks()), (2, 3));
    }
}
