//! One request budget per client, fed by Hetzner's `RateLimit-Limit/Remaining/Reset` headers.
//!
//! Hetzner gives a project a bucket of requests (3,600) refilled at about one per second, and
//! says after every answer how many are left. The budget mirrors that bucket so that no call
//! is sent that the provider has already said it would refuse: with nothing left, the next
//! caller waits for the next refill (or the announced reset, whichever is sooner); after a 429
//! every caller waits until the reset.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// The shared budget. Until the first answer arrives nothing is known and nothing waits.
#[derive(Debug)]
pub(super) struct Budget {
    refill: Duration,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Requests left as of `at`; `None` before any answer carried the headers.
    tokens: Option<f64>,
    limit: f64,
    at: Instant,
    /// When the provider said the bucket is full again.
    reset: Option<Instant>,
    /// After a 429: nobody sends before this.
    blocked_until: Option<Instant>,
    /// Requests sent whose answers have not been counted yet.
    in_flight: u32,
}

/// A slot taken from the budget; dropping it marks the request's answer as counted.
pub(super) struct Ticket<'a> {
    budget: &'a Budget,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut inner = self.budget.lock();
        inner.in_flight = inner.in_flight.saturating_sub(1);
    }
}

/// Converts a unix time in seconds to an `Instant` (sub-second precise).
pub(super) fn unix_to_instant(unix_secs: u64) -> Instant {
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(unix_secs);
    let now = Instant::now();
    match when.duration_since(SystemTime::now()) {
        Ok(ahead) => now + ahead,
        Err(_) => now,
    }
}

impl Budget {
    /// A budget that assumes one request comes back every `refill`.
    pub(super) fn new(refill: Duration) -> Self {
        Self {
            refill: refill.max(Duration::from_millis(1)),
            inner: Mutex::new(Inner {
                tokens: None,
                limit: f64::MAX,
                at: Instant::now(),
                reset: None,
                blocked_until: None,
                in_flight: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The state stays meaningful even if a holder panicked: every write is a plain store.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a slot, waiting for one when the budget is spent. `Err(wait)` instead of waiting
    /// longer than `max_wait`.
    pub(super) async fn acquire(&self, max_wait: Duration) -> Result<Ticket<'_>, Duration> {
        loop {
            let wait = self.try_take()?;
            let Some(wait) = wait else {
                return Ok(Ticket { budget: self });
            };
            if wait > max_wait {
                return Err(wait);
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// `Ok(None)`: a slot was taken; `Ok(Some(wait))`: try again after `wait`.
    fn try_take(&self) -> Result<Option<Duration>, Duration> {
        let mut inner = self.lock();
        let now = Instant::now();
        if let Some(until) = inner.blocked_until {
            if until > now {
                return Ok(Some(until - now));
            }
            inner.blocked_until = None;
        }
        let Some(tokens) = inner.tokens else {
            inner.in_flight += 1;
            return Ok(None);
        };
        let mut tokens =
            tokens + now.duration_since(inner.at).as_secs_f64() / self.refill.as_secs_f64();
        if inner.reset.is_some_and(|r| r <= now) {
            // The provider said the bucket is full by now.
            tokens = inner.limit;
            inner.reset = None;
        }
        tokens = tokens.min(inner.limit);
        inner.at = now;
        if tokens >= 1.0 {
            inner.tokens = Some(tokens - 1.0);
            inner.in_flight += 1;
            return Ok(None);
        }
        inner.tokens = Some(tokens);
        let mut wait = self.refill.mul_f64(1.0 - tokens);
        if let Some(r) = inner.reset {
            wait = wait.min(r - now);
        }
        // Never spin: a refill cannot be sooner than a millisecond away.
        Ok(Some(wait.max(Duration::from_millis(1))))
    }

    /// Takes in what an answer's headers said. Answers without them change nothing.
    pub(super) fn observe(&self, limit: Option<u64>, remaining: Option<u64>, reset: Option<u64>) {
        let Some(remaining) = remaining else { return };
        let mut inner = self.lock();
        // The answer counts its own request; others still in flight may not be counted yet,
        // so assume they were sent after it and take them off too (waiting a little more).
        let others = f64::from(inner.in_flight.saturating_sub(1));
        inner.tokens = Some(remaining as f64 - others);
        inner.at = Instant::now();
        if let Some(limit) = limit {
            inner.limit = limit as f64;
        }
        inner.reset = reset.map(unix_to_instant);
    }

    /// After a 429: nobody sends until `until`.
    pub(super) fn block_until(&self, until: Instant) {
        let mut inner = self.lock();
        inner.tokens = Some(0.0);
        inner.at = Instant::now();
        inner.blocked_until = Some(inner.blocked_until.map_or(until, |b| b.max(until)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unknown_budget_never_waits_and_a_spent_one_waits_for_one_refill() {
        let budget = Budget::new(Duration::from_millis(200));
        for _ in 0..5 {
            let started = Instant::now();
            drop(
                budget
                    .acquire(Duration::ZERO)
                    .await
                    .expect("nothing heard yet: no waiting"),
            );
            assert!(started.elapsed() < Duration::from_millis(50));
        }
        budget.observe(Some(10), Some(0), None);
        let wait = budget.try_take().unwrap().expect("spent: must wait");
        assert!(
            wait <= Duration::from_millis(200) && wait > Duration::from_millis(150),
            "{wait:?}"
        );
        let started = Instant::now();
        let _ticket = budget.acquire(Duration::from_secs(1)).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(150));
        assert_eq!(
            budget
                .acquire(Duration::from_millis(10))
                .await
                .err()
                .map(|w| w > Duration::from_millis(10)),
            Some(true),
            "a wait beyond the bound is refused, not slept"
        );
    }

    #[test]
    fn a_reset_in_the_past_fills_the_bucket_and_a_429_blocks_everyone() {
        let budget = Budget::new(Duration::from_secs(3600));
        let past = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            - 5;
        budget.observe(Some(3), Some(0), Some(past));
        assert_eq!(budget.try_take(), Ok(None));
        budget.block_until(Instant::now() + Duration::from_secs(30));
        let wait = budget.try_take().unwrap().unwrap();
        assert!(wait > Duration::from_secs(29), "{wait:?}");
    }
}
