//! Retention of headroom history: raw samples, minute and hour rollups each kept for their
//! setting (`ctx.settings.retention`), and ended deficits kept as long as the hour rollups
//! (the longest chart that could annotate them), deleted in small batches so the scraper's
//! writes never wait behind one long delete.
//!
//! An open deficit is never deleted, nor an ended one whose settlement is still due
//! (`deficit::resume` finishes it first). A deleted deficit's `evidence` line on the request it
//! filed stays with that request (requests are the audit trail and are not pruned here); it
//! is bounded like the deficit's own copy (`deficit::EVIDENCE_MAX_BYTES`).

use std::time::Duration;

use crate::context::Ctx;
use crate::db;
use crate::domain::capacity::Resolution;
use crate::domain::{millis, UnixMillis};

/// Rows one write transaction deletes at most (a few milliseconds of SQLite work).
pub const BATCH: i64 = 5_000;

/// Time between prunes; the first runs at start. Each prune then deletes about what the
/// scraper wrote in the same minute, however many fleets there are: at ten minutes, one
/// prune of 100 fleets' samples under load took the WAL's high-water mark from 5 to 8 MiB
/// (the soak).
pub const EVERY: Duration = Duration::from_secs(60);

/// Rows one prune deleted, per table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Raw samples.
    pub raw: u64,
    /// Minute rollups.
    pub minute: u64,
    /// Hour, two-hour and six-hour rollups.
    pub hour: u64,
    /// Ended deficits.
    pub deficits: u64,
}

impl Pruned {
    /// The most rows deleted from one table.
    fn largest(&self) -> u64 {
        self.raw.max(self.minute).max(self.hour).max(self.deficits)
    }
}

/// Which rows a prune removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Raw,
    Rollup(Resolution),
    Deficits,
}

/// Deletes every row older than its retention, `BATCH` rows per short `BEGIN IMMEDIATE`
/// transaction, yielding between batches so other writers take the lock in turn.
// A failed prune is a warning: the next one tries again (see `run_until_stopped`).
#[tracing::instrument(skip_all, err(level = "warn"))]
pub async fn prune_once(ctx: &Ctx) -> anyhow::Result<Pruned> {
    let now = ctx.now();
    let r = ctx.settings.retention;
    let raw = prune(ctx, Kind::Raw, cutoff(now, r.raw)).await?;
    // Five-minute rollups are kept as long as the minute ones: they summarise the same span.
    let minute = prune(ctx, Kind::Rollup(Resolution::Minute), cutoff(now, r.minute)).await?
        + prune(
            ctx,
            Kind::Rollup(Resolution::FiveMinutes),
            cutoff(now, r.minute),
        )
        .await?;
    // Two- and six-hour rollups are kept as long as the hour ones: they summarise the same
    // span.
    let hour = prune(ctx, Kind::Rollup(Resolution::Hour), cutoff(now, r.hour)).await?
        + prune(ctx, Kind::Rollup(Resolution::TwoHours), cutoff(now, r.hour)).await?
        + prune(ctx, Kind::Rollup(Resolution::SixHours), cutoff(now, r.hour)).await?;
    let deficits = prune(ctx, Kind::Deficits, cutoff(now, r.hour)).await?;
    Ok(Pruned {
        raw,
        minute,
        hour,
        deficits,
    })
}

fn cutoff(now: UnixMillis, keep: Duration) -> UnixMillis {
    now.saturating_sub(millis(keep))
}

async fn prune(ctx: &Ctx, kind: Kind, before: UnixMillis) -> anyhow::Result<u64> {
    let mut total = 0;
    loop {
        let mut tx = db::begin_write(&ctx.pool).await?;
        let n = match kind {
            Kind::Raw => db::fleet_samples::prune_raw(&mut tx, before, BATCH).await?,
            Kind::Rollup(res) => {
                db::fleet_samples::prune_rollups(&mut tx, res, before, BATCH).await?
            }
            Kind::Deficits => db::fleet_deficits::prune_ended(&mut tx, before, BATCH).await?,
        };
        tx.commit().await?;
        total += n;
        if n < BATCH as u64 {
            return Ok(total);
        }
        tokio::task::yield_now().await;
    }
}

/// Prunes at start and then every [`EVERY`] until `shutdown` turns true (or its sender goes).
pub async fn run_until_stopped(ctx: Ctx, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            // A stop wins over a due tick, so shutdown never waits for one more prune.
            biased;
            () = crate::shutdown::requested(&mut shutdown) => break,
            // Of several instances on one database, the lease holder prunes.
            _ = tick.tick() => match prune_if_ours(&ctx).await {
                // Every minute's prune removes the minute that expired: that is routine. One
                // that needed more than a batch (a backlog after downtime, a shortened
                // retention) is worth an operator's eye.
                Ok(p) if p.largest() > BATCH as u64 => tracing::info!(
                    samples.raw = p.raw, rollups.minute = p.minute, rollups.hour = p.hour,
                    deficits = p.deficits, "old headroom history removed"
                ),
                Ok(p) => tracing::debug!(
                    samples.raw = p.raw, rollups.minute = p.minute, rollups.hour = p.hour,
                    deficits = p.deficits, "old headroom history removed"
                ),
                // The next tick tries again: a failed prune only keeps history a little longer.
                Err(e) => tracing::warn!(error = %e, "headroom retention prune failed"),
            },
        }
    }
    crate::leases::release(&ctx, &crate::leases::job(JOB)).await;
    tracing::debug!("headroom retention stopped");
}

/// The retention job's lease name.
const JOB: &str = "retention";

/// [`prune_once`] when this instance holds the retention lease; nothing removed otherwise.
async fn prune_if_ours(ctx: &Ctx) -> anyhow::Result<Pruned> {
    if !crate::leases::runs_job(ctx, JOB, EVERY).await {
        return Ok(Pruned::default());
    }
    prune_once(ctx).await
}
