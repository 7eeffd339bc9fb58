//! The scrape loops: a supervisor lists the fleets every `LIST_EVERY`, keeps one task per
//! fleet (restarted when what scraping depends on changes, stopped when the fleet is deleted),
//! and each task scrapes on its own schedule (a random offset, then every interval, late ticks
//! skipped and counted), under one global bound of scrapes in flight, handing every sample to
//! `crate::capacity::record::record`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use super::{derived, scrape_with, ScrapeStats};
use crate::context::Ctx;
use crate::domain::fleet::FleetSpec;
use crate::domain::Caller;

/// How often the supervisor looks for new, changed and deleted fleets.
pub const LIST_EVERY: Duration = Duration::from_secs(10);

/// What a fleet's loop depends on; a change to any of it restarts the loop (a change to its
/// approvals or secrets does not).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ScrapeKey {
    endpoints: Vec<String>,
    interval_secs: u32,
    timeout_secs: u32,
    required_override: Option<u32>,
    restore_machine_config: String,
}

impl ScrapeKey {
    fn of(spec: &FleetSpec) -> Self {
        Self {
            endpoints: spec.endpoints().to_vec(),
            interval_secs: spec.scrape_interval_secs(),
            timeout_secs: spec.scrape_timeout_secs(),
            required_override: spec.required_override(),
            restore_machine_config: spec.restore_machine_config().to_string(),
        }
    }
}

/// One fleet's running loop.
struct Running {
    key: ScrapeKey,
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
}

/// Runs one scrape loop per fleet until `shutdown` turns true (or its sender is dropped),
/// then stops every loop and waits for them: a scrape in flight is abandoned (it only reads),
/// a sample being recorded is finished.
pub async fn run_until_stopped(ctx: Ctx, stats: Arc<ScrapeStats>, shutdown: watch::Receiver<bool>) {
    supervise(ctx, stats, shutdown, LIST_EVERY).await;
}

/// [`run_until_stopped`] looking for fleet changes every `list_every`: tests list often, so
/// an edit or a delete reaches the loops without waiting `LIST_EVERY`.
pub async fn supervise(
    ctx: Ctx,
    stats: Arc<ScrapeStats>,
    mut shutdown: watch::Receiver<bool>,
    list_every: Duration,
) {
    let permits = Arc::new(Semaphore::new(ctx.settings.scrape_concurrency.max(1)));
    let mut running: HashMap<String, Running> = HashMap::new();
    while !*shutdown.borrow() {
        match crate::fleets::list(&ctx, &Caller::system()).await {
            Ok(fleets) => {
                let specs: Vec<FleetSpec> = fleets.into_iter().map(|f| f.spec).collect();
                reconcile(&ctx, &stats, &permits, &mut running, specs).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "scraper could not list fleets; keeping its loops")
            }
        }
        // Proposals and settlements that failed after their sample committed are retried
        // here, not only at the next start (two indexed reads that find nothing when none is).
        if let Err(e) = crate::capacity::deficit::resume(&ctx).await {
            tracing::warn!(error = ?e, "deficit work left undone; retried next pass");
        }
        tokio::select! {
            changed = shutdown.changed() => if changed.is_err() { break },
            _ = tokio::time::sleep(list_every) => {}
        }
    }
    // Every loop is told first, then awaited: stopped one by one, a loop still waiting for a
    // permit would take the one a stopped loop just gave up and start a scrape at shutdown.
    let all: Vec<Running> = running.into_values().collect();
    for r in &all {
        let _ = r.stop.send(true);
    }
    for r in all {
        stop(r).await;
    }
}

/// Starts loops for new fleets, restarts changed ones, stops deleted ones.
async fn reconcile(
    ctx: &Ctx,
    stats: &Arc<ScrapeStats>,
    permits: &Arc<Semaphore>,
    running: &mut HashMap<String, Running>,
    specs: Vec<FleetSpec>,
) {
    let gone: Vec<String> = running
        .keys()
        .filter(|name| !specs.iter().any(|s| s.name() == *name))
        .cloned()
        .collect();
    for name in gone {
        if let Some(r) = running.remove(&name) {
            tracing::info!(fleet.name = %name, "fleet deleted; its scrape loop stops");
            stop(r).await;
        }
    }
    for spec in specs {
        let key = ScrapeKey::of(&spec);
        if running
            .get(spec.name().as_str())
            .is_some_and(|r| r.key == key)
        {
            continue;
        }
        if let Some(old) = running.remove(spec.name().as_str()) {
            tracing::info!(fleet.name = %spec.name(), "fleet changed; its scrape loop restarts");
            stop(old).await;
        }
        let (tx, rx) = watch::channel(false);
        let name = spec.name().clone();
        let handle = tokio::spawn(fleet_loop(
            ctx.clone(),
            spec,
            stats.clone(),
            permits.clone(),
            rx,
        ));
        running.insert(
            name.to_string(),
            Running {
                key,
                stop: tx,
                handle,
            },
        );
    }
}

async fn stop(r: Running) {
    // The loop may have ended on its own already; then there is no receiver.
    let _ = r.stop.send(true);
    if let Err(e) = r.handle.await {
        tracing::warn!(error = %e, "a scrape loop ended abnormally");
    }
}

/// A uniformly random offset in `[0, interval)`, so fleets created together do not tick
/// together.
fn jitter(interval: Duration) -> Duration {
    let mut bytes = [0u8; 8];
    if getrandom::getrandom(&mut bytes).is_err() {
        // No randomness: start at once rather than not at all.
        return Duration::ZERO;
    }
    let ms = u64::try_from(interval.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    Duration::from_millis(u64::from_le_bytes(bytes) % ms)
}

/// Scheduled ticks that were dropped before a tick that starts `lag` after its schedule: every
/// whole `interval` of lag passed over one. `MissedTickBehavior::Skip` hands out the earliest
/// missed deadline and skips the rest up to now, so a stall of 3.5 intervals ran one tick
/// late and dropped three, and counting it as one miss would hide how long the loop stalled.
fn dropped_ticks(lag: Duration, interval: Duration) -> u64 {
    if interval.is_zero() {
        return 0;
    }
    u64::try_from(lag.as_nanos() / interval.as_nanos()).unwrap_or(u64::MAX)
}

/// Scrapes one fleet on its schedule until `stop` turns true, while this instance holds the
/// fleet's lease; gives the lease up when it stops.
async fn fleet_loop(
    ctx: Ctx,
    spec: FleetSpec,
    stats: Arc<ScrapeStats>,
    permits: Arc<Semaphore>,
    stop: watch::Receiver<bool>,
) {
    let lease = crate::leases::scrape(spec.name().as_str());
    scrape_while_held(&ctx, &spec, &stats, &permits, stop, &lease).await;
    crate::leases::release(&ctx, &lease).await;
}

/// How long a scrape lease holds: one interval and a quarter from the last recorded sample
/// (the holder extends it after each), so the holder keeps it through a late tick, and a
/// standby asking every half interval takes a dead holder's fleet within 1¾ intervals of its
/// last sample.
fn scrape_lease_ttl(interval: Duration) -> Duration {
    interval + interval / 4
}

/// Whether this instance holds lease `name` (taking it for `ttl` when free, not extending it
/// when its own); an unanswered ask is a "no".
async fn holds(ctx: &Ctx, name: &str, ttl: Duration) -> bool {
    crate::leases::hold_unextended(ctx, name, ttl)
        .await
        .inspect_err(|e| tracing::warn!(lease = name, error = %e, "scrape lease not checked"))
        .unwrap_or(false)
}

async fn scrape_while_held(
    ctx: &Ctx,
    spec: &FleetSpec,
    stats: &ScrapeStats,
    permits: &Arc<Semaphore>,
    mut stop: watch::Receiver<bool>,
    lease: &str,
) {
    let interval = Duration::from_secs(u64::from(spec.scrape_interval_secs().max(1)));
    let ttl = scrape_lease_ttl(interval);
    let first_tick = Instant::now() + jitter(interval);
    let mut ticker = tokio::time::interval_at(first_tick, interval);
    // After a stall, one late tick runs and the schedule resumes on its grid: no burst of
    // catch-up scrapes that would all read the same state.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut regions = derived::Regions::default();
    // A loop that starts asks for the lease at once, without waiting for its random offset:
    // a fleet whose scraping instance died (or this instance's own earlier boot) is scraped
    // now, and the offset spreads the ticks after it.
    let mut at_once = true;
    loop {
        let mut scheduled = if std::mem::take(&mut at_once) {
            let now = Instant::now();
            if first_tick.saturating_duration_since(now) < interval / 2 {
                // Not two scrapes within half an interval.
                ticker.reset_at(first_tick + interval);
            }
            now
        } else {
            tokio::select! {
                t = ticker.tick() => t,
                _ = stop.changed() => return,
            }
        };
        if !holds(ctx, lease, ttl).await {
            // Another instance scrapes this fleet: ask again every half interval, and scrape
            // at once when its lease runs out (its holder died or stopped).
            loop {
                tokio::select! {
                    () = tokio::time::sleep(interval / 2) => {}
                    _ = stop.changed() => return,
                }
                if holds(ctx, lease, ttl).await {
                    break;
                }
            }
            ticker.reset();
            scheduled = Instant::now();
        }
        let permit = tokio::select! {
            // A stop wins over a permit freed at the same moment.
            biased;
            _ = stop.changed() => return,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        // Lag counts from the schedule to the scrape's real start, waiting for a permit
        // included: that wait is what a too-small `scrape_concurrency` costs.
        let lag = Instant::now().saturating_duration_since(scheduled);
        stats.tick_after_missing(
            u64::try_from(lag.as_millis()).unwrap_or(u64::MAX),
            dropped_ticks(lag, interval),
        );
        let sample = tokio::select! {
            s = scrape_with(ctx, spec, &mut regions) => s,
            _ = stop.changed() => return,
        };
        drop(permit);
        if sample.outcome.is_err() {
            stats.failure();
        }
        // Not raced against `stop`: a sample being written is finished, and `record` keeps
        // its transaction short.
        if let Err(e) = crate::capacity::record::record(ctx, spec.name(), &sample).await {
            tracing::warn!(fleet.name = %spec.name(), error = %e, "sample not recorded");
        } else {
            // Extended only now: the lease ends a fixed time after the last recorded sample,
            // whenever this instance dies, so a standby takes over within 1.75 intervals of it.
            if let Err(e) = crate::leases::hold(ctx, lease, ttl).await {
                tracing::warn!(lease, error = %e, "scrape lease not renewed");
            }
            if let Ok(obs) = &sample.outcome {
                // Created machines become spares only once they are members.
                super::joins::follow(ctx, spec.name(), obs, sample.at).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_whole_interval_of_lag_is_one_dropped_tick() {
        let i = Duration::from_secs(15);
        assert_eq!(dropped_ticks(Duration::ZERO, i), 0);
        assert_eq!(dropped_ticks(Duration::from_millis(14_999), i), 0);
        assert_eq!(dropped_ticks(Duration::from_secs(15), i), 1);
        assert_eq!(dropped_ticks(Duration::from_millis(52_500), i), 3);
        assert_eq!(dropped_ticks(Duration::from_secs(150), i), 10);
        assert_eq!(dropped_ticks(Duration::from_secs(1), Duration::ZERO), 0);
    }

    /// The count matches what tokio's `Skip` really drops: a loop that stalls for 3.5
    /// intervals gets one late tick, whose lag says how many grid ticks are then never run
    /// before the next one. (Real time, with wide margins: a 100 ms pause between two adjacent
    /// lines would be needed to straddle a grid point.)
    #[tokio::test(flavor = "current_thread")]
    async fn the_count_matches_the_ticks_skip_drops() {
        let interval = Duration::from_millis(200);
        let start = Instant::now();
        let mut ticker = tokio::time::interval_at(start, interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
        assert_eq!(ticker.tick().await, start);
        // The stall: the loop is busy (the runtime blocked) for 700 ms.
        std::thread::sleep(Duration::from_millis(700));
        let scheduled = ticker.tick().await;
        let lag = Instant::now().saturating_duration_since(scheduled);
        let counted = dropped_ticks(lag, interval);
        assert_eq!(
            scheduled,
            start + interval,
            "the first missed tick runs, late"
        );
        assert!(counted >= 2, "lag {lag:?} counted {counted}");
        let next = ticker.tick().await;
        // Grid points strictly between the late tick and the next one were never run.
        let skipped = (next - scheduled).as_millis() / interval.as_millis() - 1;
        assert_eq!(u128::from(counted), skipped, "lag {lag:?}");
    }
}
