//! The runner's claim on a request it executes (`provisions.runner_id`, `lease_until`). The
//! claim that moves a request to `executing` takes the lease; the executing process renews it
//! while it works; every step that precedes a provider call checks it in its own transaction,
//! so a process that lost its lease sends nothing more. Another instance resumes the request
//! through its provision label once the lease has run out (or at once when the holder was an
//! earlier boot of its own name).

use std::time::Duration;

use sqlx::AnyConnection;

use crate::context::Ctx;
use crate::db::{self, provision_jobs};
use crate::domain::lease::{self, Held};

/// The end of a lease taken or renewed now.
fn until(ctx: &Ctx) -> crate::domain::UnixMillis {
    lease::until(ctx.now(), millis(ctx.settings.lease))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Takes the lease of request `id`, just moved to `executing` in `tx`.
pub(super) async fn take_on_claim(
    tx: &mut AnyConnection,
    ctx: &Ctx,
    id: i64,
) -> anyhow::Result<()> {
    let taken = provision_jobs::swap_lease(tx, id, None, ctx.instance.holder(), until(ctx)).await?;
    anyhow::ensure!(taken, "provision {id}: claimed, but its lease was not free");
    Ok(())
}

/// The requests this process may resume now, oldest first, as they were read (the lease
/// each was seen with is what [`take`] compares).
pub(super) async fn resumable(ctx: &Ctx) -> anyhow::Result<Vec<(i64, Option<Held>)>> {
    let now = ctx.now();
    let mut conn = ctx.pool.acquire().await?;
    let all =
        provision_jobs::executing_leases(&mut conn, ctx.settings.join_timeout.is_some()).await?;
    Ok(all
        .into_iter()
        .filter(|(_, seen)| lease::may_resume(seen.as_ref(), &ctx.instance, now))
        .collect())
}

/// Says in the log whose execution this process takes over: a request left by another
/// instance (its lease ran out), or by an earlier boot of this instance (a restart). A lease
/// of this instance's name still running is taken at once; if that process is in fact alive,
/// two processes share one `instance_name`, which the warning names.
pub(super) fn note_takeover(ctx: &Ctx, id: i64, seen: Option<&Held>) {
    match seen {
        Some(h) if h.until > ctx.now() => tracing::warn!(
            provision.id = id,
            previous = %h.holder,
            "resuming the execution of an earlier boot of this instance before its lease ran \
             out; if that process is still running, two processes share instance_name {}",
            ctx.instance.name()
        ),
        Some(h) => {
            tracing::info!(provision.id = id, previous = %h.holder, "resuming an execution whose lease ran out")
        }
        None => tracing::info!(provision.id = id, "resuming an interrupted execution"),
    }
}

/// Takes request `id`'s lease if it is still as `seen`. False when another instance was
/// quicker (or the request moved on).
pub(super) async fn take(ctx: &Ctx, id: i64, seen: Option<&Held>) -> anyhow::Result<bool> {
    let mut tx = db::begin_write(&ctx.pool).await?;
    let taken =
        provision_jobs::swap_lease(&mut tx, id, seen, ctx.instance.holder(), until(ctx)).await?;
    tx.commit().await?;
    Ok(taken)
}

/// Renews request `id`'s lease every third of its length for as long as it is held; returns
/// (with why) once it is not: taken over by another instance, or not renewable before it ran
/// out (the database unreachable), so another instance may be resuming it.
pub(super) async fn keep(ctx: &Ctx, id: i64) -> anyhow::Error {
    let every = ctx.settings.lease / 3;
    let mut held_until = until(ctx);
    loop {
        tokio::time::sleep(every).await;
        let next = until(ctx);
        let renewed = async {
            let mut conn = ctx.pool.acquire().await?;
            provision_jobs::renew_lease(&mut conn, id, ctx.instance.holder(), next).await
        };
        match renewed.await {
            Ok(true) => held_until = next,
            Ok(false) => {
                return anyhow::anyhow!("provision {id}: another instance took over its execution")
            }
            Err(e) if ctx.now() < held_until => {
                tracing::warn!(provision.id = id, error = %e, "lease not renewed; retrying");
            }
            Err(e) => {
                return anyhow::anyhow!(
                    "provision {id}: its lease ran out while it could not be renewed ({e})"
                )
            }
        }
    }
}

/// After request `id`'s execution stopped on an error: keeps its lease one more lease time
/// and no longer, so it is retried then (by this instance or another) instead of at once by
/// every instance at every poll, each retry a label lookup at the provider.
pub(super) async fn back_off(ctx: &Ctx, id: i64) {
    let given = async {
        let mut conn = ctx.pool.acquire().await?;
        provision_jobs::renew_lease(&mut conn, id, ctx.instance.holder(), until(ctx)).await
    };
    if let Err(e) = given.await {
        tracing::warn!(provision.id = id, error = %e, "lease not given up; it runs out by itself");
    }
}

/// Fails unless this process holds request `id`'s lease for a third of a lease more: called
/// inside the transaction of each step before it commits. The margin is for the provider call
/// that follows the commit (the holder renews every third of a lease, so a live one always
/// has it): a process stalled so long that its lease is nearly over sends nothing.
pub(super) async fn check(tx: &mut AnyConnection, ctx: &Ctx, id: i64) -> anyhow::Result<()> {
    let margin = lease::until(ctx.now(), millis(ctx.settings.lease / 3));
    let held = provision_jobs::holds_lease(tx, id, ctx.instance.holder(), margin).await?;
    anyhow::ensure!(
        held,
        "provision {id}: this instance no longer holds the lease on its execution; \
         nothing more is sent from here"
    );
    Ok(())
}
