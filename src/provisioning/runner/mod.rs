//! The durable job runner: claims approved requests and executes them exactly once against
//! the provider, reconciles `executing` requests on start-up, and lets an approver destroy a
//! failed machine.
//!
//! Durability rests on two habits. Every machine step is committed before the provider call
//! it announces, so after a crash the record says what may have been sent. And every create
//! is preceded by a lookup through the provision label, because Hetzner has no idempotency
//! key: a server that exists is adopted, never created twice.
//!
//! - `claim`: expiry, the pre-flight re-render (supersede on a changed plan), the claim.
//! - `lease`: which instance executes a request, renewed while it works, checked before
//!   every provider call, taken over when it runs out.
//! - `payload`: renders the plan's exact versions with the fleet's current secrets.
//! - `execute`: label lookup, create, poll, finish.
//! - `destroy`: an approver's destroy of a failed machine.

mod claim;
mod destroy;
mod execute;
mod lease;
mod payload;

use std::time::Duration;

use crate::config::Settings;
use crate::context::Ctx;
use crate::db::{self, provision_jobs};

pub use destroy::destroy_machine;

/// Bounds of the runner's waiting and retrying, from the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// How often the loop looks for approved requests when nothing wakes it.
    pub poll: Duration,
    /// First wait between two polls of a provider action (doubling up to 8×).
    pub action_poll: Duration,
    /// Polls of one action (or one adopted server) before the machine is given up as failed.
    pub action_polls: u32,
    /// Create attempts per machine after transient failures (each after a label lookup).
    pub create_attempts: u32,
    /// Longest wait the runner honours for a provider's "retry after".
    pub max_wait: Duration,
}

impl Options {
    /// The runner's bounds for these settings.
    pub fn from_settings(s: &Settings) -> Self {
        Options {
            poll: s.runner_poll,
            action_poll: s.runner_action_poll,
            action_polls: 60,
            create_attempts: 3,
            max_wait: Duration::from_secs(60),
        }
    }

    /// The wait before poll number `n` (0-based): doubling, capped at 8× the first.
    fn poll_delay(&self, n: u32) -> Duration {
        self.action_poll * 2u32.pow(n.min(3))
    }
}

/// Expires what is due, resumes one execution whose lease ran out, or else runs the oldest
/// approved request to its end. True when it did any work (an expiry, a resumption, a
/// supersession or an execution), so the loop tries again at once.
#[tracing::instrument(skip_all, err)]
pub async fn run_once(ctx: &Ctx) -> anyhow::Result<bool> {
    let expired = crate::provisioning::requests::expire_due_once(ctx).await?
        + crate::provisioning::joins::fail_overdue(ctx).await?;
    let opts = Options::from_settings(&ctx.settings);
    for (id, seen) in lease::resumable(ctx).await? {
        if lease::take(ctx, id, seen.as_ref()).await? {
            lease::note_takeover(ctx, id, seen.as_ref());
            // A request that fails again waits out its back-off; new work is not held up.
            if let Err(e) = execute_leased(ctx, &opts, id, None).await {
                tracing::error!(provision.id = id, error = %format!("{e:#}"), "resuming failed; retried after a lease");
            }
            return Ok(true);
        }
    }
    let job = {
        let mut conn = ctx.pool.acquire().await?;
        provision_jobs::oldest_approved(&mut conn, ctx.now()).await?
    };
    let Some(job) = job else {
        return Ok(expired > 0);
    };
    match claim::claim(ctx, &job).await? {
        claim::Claimed::Run(payloads) => {
            execute_leased(ctx, &opts, job.id, Some(*payloads)).await?;
        }
        claim::Claimed::Superseded | claim::Claimed::Lost => {}
    }
    Ok(true)
}

/// Executes request `id` (whose lease this process holds) while renewing the lease; stops
/// at once if the lease is lost. On an error the lease is kept one more lease time (a
/// back-off), then the request is resumed by whichever instance looks first.
async fn execute_leased(
    ctx: &Ctx,
    opts: &Options,
    id: i64,
    payloads: Option<payload::Payloads>,
) -> anyhow::Result<()> {
    // Dropping the execution when the lease is lost is safe by design: every step was
    // committed before its call, and whoever holds the lease now resumes through the label.
    let outcome = tokio::select! {
        biased;
        r = execute::execute(ctx, opts, id, payloads) => r,
        lost = lease::keep(ctx, id) => return Err(lost),
    };
    if outcome.is_err() {
        lease::back_off(ctx, id).await;
    }
    outcome
}

/// Finishes every request left `executing` by a process that is gone: an earlier boot of
/// this instance (at once) or another instance whose lease ran out, adopting through the
/// provision label what exists and creating what does not. Called once at start, before the
/// loop (and again after a failed iteration). Returns how many requests it resumed.
#[tracing::instrument(skip_all, err)]
pub async fn reconcile_on_start(ctx: &Ctx) -> anyhow::Result<usize> {
    let opts = Options::from_settings(&ctx.settings);
    let mut resumed = 0;
    for (id, seen) in lease::resumable(ctx).await? {
        if !lease::take(ctx, id, seen.as_ref()).await? {
            continue;
        }
        resumed += 1;
        lease::note_takeover(ctx, id, seen.as_ref());
        // One request that cannot be finished now must not keep the others interrupted.
        if let Err(e) = execute_leased(ctx, &opts, id, None).await {
            tracing::error!(provision.id = id, error = %format!("{e:#}"), "reconcile failed; retried by the loop");
        }
    }
    Ok(resumed)
}

/// Runs [`run_once`] whenever a request is approved (`ctx.jobs`) or the poll interval
/// passes, until `shutdown` turns true. A failed iteration is logged and the loop goes on:
/// the runner never takes the server down.
pub async fn run_until_stopped(ctx: Ctx, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let poll = Options::from_settings(&ctx.settings).poll;
    loop {
        // Drain: one request per iteration, again at once while there is work. A stop drops an
        // execution mid-call; that is safe by design (every step was committed before its
        // call) and the next start's reconcile finishes it.
        let outcome = tokio::select! {
            biased;
            () = crate::shutdown::requested(&mut shutdown) => break,
            r = run_once(&ctx) => r,
        };
        let did_work = match outcome {
            Ok(worked) => worked,
            Err(e) => {
                tracing::error!(
                    error = format!("{e:#}"),
                    "provisioning runner iteration failed"
                );
                // An execution that stopped on an error (a busy database, say) keeps its lease
                // one more lease time: after it, finish it the way a restart would — through
                // the label — unless another instance was quicker.
                tokio::select! {
                    biased;
                    () = crate::shutdown::requested(&mut shutdown) => break,
                    () = tokio::time::sleep(poll) => {}
                }
                if let Err(e) = reconcile_on_start(&ctx).await {
                    tracing::error!(
                        error = format!("{e:#}"),
                        "resuming interrupted provisions failed"
                    );
                }
                false
            }
        };
        if did_work {
            continue;
        }
        tokio::select! {
            biased;
            () = crate::shutdown::requested(&mut shutdown) => break,
            () = ctx.jobs.notified() => {}
            () = tokio::time::sleep(poll) => {}
        }
    }
    tracing::debug!("provisioning runner stopped");
}

/// Starts the runner beside the server: reconciles first (so an interrupted execution is
/// finished before anything new is claimed), then loops until `shutdown`.
pub async fn start(ctx: Ctx, shutdown: tokio::sync::watch::Receiver<bool>) {
    if let Err(e) = reconcile_on_start(&ctx).await {
        tracing::error!(
            error = format!("{e:#}"),
            "reconciling interrupted provisions failed"
        );
    }
    run_until_stopped(ctx, shutdown).await;
}

/// A stored request as the operations see it.
async fn provision(ctx: &Ctx, id: i64) -> anyhow::Result<crate::provisioning::Provision> {
    let mut conn = ctx.pool.acquire().await?;
    crate::provisioning::requests::load(&mut conn, id)
        .await
        .map_err(anyhow::Error::new)?
        .ok_or_else(|| anyhow::anyhow!("provision {id} vanished"))
}

/// Appends a timeline line in its own committed transaction.
async fn event(
    ctx: &Ctx,
    provision_id: i64,
    kind: &str,
    machine: Option<&str>,
    message: &str,
    details: serde_json::Value,
) -> anyhow::Result<()> {
    let mut tx = db::begin_write(&ctx.pool).await?;
    db::provision_events::append(
        &mut tx,
        db::provision_events::NewEvent {
            provision_id,
            at: ctx.now(),
            kind,
            machine,
            message,
            details: &details,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_polls_back_off_to_eight_times_the_first_wait() {
        let opts = Options {
            poll: Duration::from_secs(1),
            action_poll: Duration::from_millis(100),
            action_polls: 10,
            create_attempts: 3,
            max_wait: Duration::from_secs(60),
        };
        let waits: Vec<u128> = (0..6).map(|n| opts.poll_delay(n).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 800, 800]);
    }
}
