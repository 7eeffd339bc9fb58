//! Claiming an approved request: check that the plan still holds (render again, compare),
//! then move it approved → executing in a `BEGIN IMMEDIATE` transaction, taking the
//! execution's lease in it. The transition is a compare-and-set, so of two runners (or two
//! instances) exactly one wins.

use super::payload::{self, Payloads};
use crate::context::Ctx;
use crate::db::{self, provision_jobs, provisions};
use crate::domain::{Actor, ProvisionState};
use crate::provisioning::transition::{self, Outcome, Transition};

/// What became of the request.
pub(super) enum Claimed {
    /// Ours to execute, with its real payloads (in memory only).
    Run(Box<Payloads>),
    /// The plan no longer matched: superseded, with the reason in the record.
    Superseded,
    /// Someone else moved it first (another runner claimed it, a person cancelled it), or
    /// its run window closed (expired).
    Lost,
}

/// Re-renders, then supersedes or claims `job` (read as `approved`).
pub(super) async fn claim(ctx: &Ctx, job: &provisions::ProvisionRow) -> anyhow::Result<Claimed> {
    let stale = match payload::render(ctx, job).await? {
        Err(stale) => stale,
        Ok(p) => {
            let mut tx = db::begin_write(&ctx.pool).await?;
            // The run window may have closed while the payloads were rendered: an expired
            // approval never runs, however close the runner came.
            let closes = provision_jobs::expires_at(&mut tx, job.id).await?;
            if closes.is_some_and(|at| at <= ctx.now()) {
                let reason = "the run window closed before execution started";
                let t = from_approved(job.id, ProvisionState::Expired, reason);
                transition::apply(&mut tx, ctx, ctx.now(), t).await?;
                tx.commit().await?;
                return Ok(Claimed::Lost);
            }
            let t = from_approved(job.id, ProvisionState::Executing, "");
            let outcome = transition::apply(&mut tx, ctx, ctx.now(), t).await?;
            if outcome == Outcome::Moved {
                super::lease::take_on_claim(&mut tx, ctx, job.id).await?;
            }
            tx.commit().await?;
            return Ok(match outcome {
                Outcome::Moved => Claimed::Run(Box::new(p)),
                Outcome::Lost => Claimed::Lost,
            });
        }
    };
    let reason = format!("the plan no longer matches: {stale}; file a new request");
    let mut tx = db::begin_write(&ctx.pool).await?;
    let t = from_approved(job.id, ProvisionState::Superseded, &reason);
    let outcome = transition::apply(&mut tx, ctx, ctx.now(), t).await?;
    tx.commit().await?;
    if outcome == Outcome::Moved {
        tracing::warn!(provision.id = job.id, reason, "approved request superseded");
    }
    Ok(match outcome {
        Outcome::Moved => Claimed::Superseded,
        Outcome::Lost => Claimed::Lost,
    })
}

/// Every move the runner makes while claiming starts from `approved` and is the system's.
fn from_approved(id: i64, to: ProvisionState, reason: &str) -> Transition<'_> {
    Transition::plain(id, ProvisionState::Approved, to, &Actor::System, reason)
}
