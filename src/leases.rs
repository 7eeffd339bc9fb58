//! Named leases as the background loops use them: a fleet's scrape (`scrape:<fleet>`) and each
//! periodic job (`job:<name>`) is done by the one instance holding its lease. The holder renews
//! it each time it does the work; when it stops cleanly it gives the lease up, and when it dies
//! another instance takes it once it runs out (`domain::lease::may_take`).

use std::time::Duration;

use crate::context::Ctx;
use crate::db;
use crate::domain::lease;

/// Takes or renews lease `name` for `ttl` from now. True when this process holds it now.
pub async fn hold(ctx: &Ctx, name: &str, ttl: Duration) -> sqlx::Result<bool> {
    let now = ctx.now();
    let mut conn = ctx.pool.acquire().await?;
    let seen = db::leases::get(&mut conn, name).await?;
    if !lease::may_take(seen.as_ref(), &ctx.instance, now) {
        return Ok(false);
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
