//! Every request a soak made: when, what kind, how long and whether it got the answer it
//! expected, kept whole (a ten-minute run makes some 100,000, a few MiB) so any window — a
//! 10 s sample, the second minute, the last — is summarised from the same record.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One request.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// Milliseconds from the start of the load to the answer's end.
    pub at_ms: u64,
    /// What it was (`dashboard`, `api fleet`, …).
    pub kind: &'static str,
    /// Round trip, answer body included, in microseconds.
    pub micros: u64,
    /// The expected status (and body, where checked) came back.
    pub ok: bool,
}

/// Failures kept word for word; later ones are only counted.
const KEPT_FAILURES: usize = 30;

/// The shared record.
pub struct RequestLog {
    start: Instant,
    entries: Mutex<Vec<Entry>>,
    failures: Mutex<Vec<String>>,
}

impl RequestLog {
    /// An empty record whose clock starts now.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            entries: Mutex::new(Vec::new()),
            failures: Mutex::new(Vec::new()),
        }
    }

    /// Time since the record started.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Records one request that took `took`.
    pub fn record(&self, kind: &'static str, took: Duration, ok: bool) {
        let entry = Entry {
            at_ms: self.start.elapsed().as_millis() as u64,
            kind,
            micros: took.as_micros() as u64,
            ok,
        };
        self.entries.lock().unwrap().push(entry);
    }

    /// Notes why a request (or a provision, or the server) failed.
    pub fn note_failure(&self, what: String) {
        let mut failures = self.failures.lock().unwrap();
        if failures.len() < KEPT_FAILURES {
            failures.push(format!("{:>6.1}s {what}", self.elapsed().as_secs_f64()));
        }
    }

    /// The failures noted, the first [`KEPT_FAILURES`] of them.
    pub fn failures(&self) -> Vec<String> {
        self.failures.lock().unwrap().clone()
    }

    /// Every entry from index `from` on, and the index after the last.
    pub fn since(&self, from: usize) -> (Vec<Entry>, usize) {
        let entries = self.entries.lock().unwrap();
        (entries[from.min(entries.len())..].to_vec(), entries.len())
    }
}

/// Counts and latency figures of a set of entries.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub requests: usize,
    pub errors: usize,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// Summarises `entries` (latencies of every request, failed ones included).
pub fn summarise<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Summary {
    let mut micros = Vec::new();
    let mut errors = 0;
    for e in entries {
        micros.push(e.micros);
        errors += usize::from(!e.ok);
    }
    micros.sort_unstable();
    Summary {
        requests: micros.len(),
        errors,
        p50_us: percentile(&micros, 0.50),
        p99_us: percentile(&micros, 0.99),
        max_us: micros.last().copied().unwrap_or(0),
    }
}

/// The nearest-rank percentile `p` (0–1) of sorted values; 0 when there are none.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Microseconds as milliseconds with two decimals.
pub fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}
