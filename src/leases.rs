//! Named leases as the background loops use them: a fleet's scrape (`scrape:<fleet>`) and each
//! periodic job (`job:<name>`) is done by the one instance holding its lease. The holder renews
//! it each time it does the work; when it stops cleanly it gives the lease up, and when it dies
//! another instance takes it once it runs out (`domain::lease::may_take`).

use std::time::Duration;

use crate::context::Ctx;
use crate::db;
use crate::domain::{lease, millis};

/// Takes or renews lease `name` for `ttl` from now. True when this process holds it now.
pub async fn hold(ctx: &Ctx, name: &str, ttl: Duration) -> sqlx::Result<bool> {
    take_or_renew(ctx, name, ttl, true).await
}

/// Takes lease `name` for `ttl` from now unless this process holds it already, which it then
/// keeps as it is (a holder that extends only once its work is done leaves a lease that ends
/// a fixed time after its last finished work, wherever it dies). True when it holds it now.
pub async fn hold_unextended(ctx: &Ctx, name: &str, ttl: Duration) -> sqlx::Result<bool> {
    take_or_renew(ctx, name, ttl, false).await
}

async fn take_or_renew(ctx: &Ctx, name: &str, ttl: Duration, extend: bool) -> sqlx::Result<bool> {
    let now = ctx.now();
    let mut conn = ctx.pool.acquire().await?;
    let seen = db::leases::get(&mut conn, name).await?;
    if !lease::may_take(seen.as_ref(), &ctx.instance, now) {
        return Ok(false);
    }
    if !extend
        && seen
            .as_ref()
            .is_some_and(|h| h.holder == ctx.instance.holder() && h.until > now)
    {
        return Ok(true);
    }
    let until = lease::until(now, u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
    if seen
        .as_ref()
        .is_some_and(|h| h.holder == ctx.instance.holder() && h.until == until)
    {
        // Renewed to the very same end (a clock that has not moved): nothing to write.
        return Ok(true);
    }
    db::leases::swap(&mut conn, name, seen.as_ref(), ctx.instance.holder(), until).await
}

/// Gives lease `name` up if this process holds it, so another instance need not wait it out.
/// Best effort: a lease that cannot be released runs out by itself.
pub async fn release(ctx: &Ctx, name: &str) {
    let released = async {
        let mut conn = ctx.pool.acquire().await?;
        db::leases::release(&mut conn, name, ctx.instance.holder()).await
    };
    if let Err(e) = released.await {
        tracing::warn!(lease = name, error = %e, "lease not released; it runs out by itself");
    }
}

/// The name of periodic job `job`'s lease.
pub fn job(job: &str) -> String {
    format!("job:{job}")
}

/// The name of fleet `fleet`'s scrape lease.
pub fn scrape(fleet: &str) -> String {
    format!("scrape:{fleet}")
}

/// The name of provider `provider`'s catalogue refresh lease.
pub fn catalogue(provider: impl std::fmt::Display) -> String {
    job(&format!("catalogue:{provider}"))
}

/// Whether this instance runs periodic job `job` (ticking `every`) this tick: it holds the
/// job's lease, for one tick and the settings' lease time beyond it, so the holder keeps it
/// from tick to tick and another instance takes over within a tick and a lease of its death.
/// A database that cannot be asked counts as "no": the holder, or this instance at a later
/// tick, does the work.
pub async fn runs_job(ctx: &Ctx, job: &str, every: Duration) -> bool {
    match hold(ctx, &self::job(job), every + ctx.settings.lease).await {
        Ok(held) => held,
        Err(e) => {
            tracing::warn!(job, error = %e, "job lease not checked; skipping this tick");
            false
        }
    }
}

/// Refuses to serve when this machine's clock is more than a quarter lease off the database
/// server's: each instance judges leases by its own clock, so instances whose clocks disagree
/// by a lease would take over each other's live work. (On SQLite the database's clock is this
/// machine's.)
pub async fn check_clock(pool: &sqlx::AnyPool, lease: Duration) -> anyhow::Result<()> {
    let wall = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, millis)
    };
    let mut conn = pool.acquire().await?;
    let before = wall();
    let Some(server) = db::server_clock_ms(&mut conn).await? else {
        return Ok(());
    };
    let skew = lease::clock_skew(before, server, wall());
    let limit = millis(lease / 4);
    anyhow::ensure!(
        skew <= limit,
        "this machine's clock is {skew} ms off the database server's (at most {limit} ms, a \
         quarter of lease_seconds, is allowed): instances judge leases by their own clocks, so \
         keep every instance's and the database's clock in time (NTP)"
    );
    Ok(())
}
