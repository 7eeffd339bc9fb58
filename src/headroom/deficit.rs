//! A deficit turned into a restore a person approves: `propose` files one request (requester
//! `system`) for the machines missing, through the same `provisioning::requests::create` every
//! request goes through (so it renders with the fleet's secret sources and waits for a human
//! approver under four-eyes); `recovered` supersedes a proposal nobody approved yet; `resume`
//! files what a crash left unfiled. Entering and leaving are announced by webhook.
//!
//! The evidence (the leader's status body and the streak's samples) is written as an
//! `evidence` line on the request's timeline, so the request's page shows why it was filed.

use serde_json::json;

use crate::auth::Caller;
use crate::context::Ctx;
use crate::db;
use crate::db::fleet_deficits::{self, DeficitRow};
use crate::db::provision_events::{self, NewEvent};
use crate::domain::clock::format_utc;
use crate::domain::{Actor, ProvisionState};
use crate::provisioning::notify::{self, FleetEvent};
use crate::provisioning::transition::{self, Transition};
use crate::provisioning::{requests, NewRequest, ProvisioningError, COUNT_MAX};

/// The reason a superseded proposal carries.
pub const RECOVERED_REASON: &str = "headroom recovered before approval";

/// What a deficit's proposal came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proposal {
    /// A restore request was filed.
    Filed(i64),
    /// A request for the fleet was already open: none was filed, the deficit points at it.
    AlreadyOpen(i64),
    /// Filing was refused; the deficit's note says why.
    NotFiled(String),
    /// Nothing to do: the deficit is gone, already settled, or already over.
    Settled,
}

/// Machines a restore asks for: the missing spares, at least one and at most a request's
/// maximum (a larger gap is closed by the next deficit once this restore has joined).
pub fn restore_count(spare: i64, required: i64) -> u32 {
    let missing = required.saturating_sub(spare).max(1);
    u32::try_from(missing).unwrap_or(COUNT_MAX).min(COUNT_MAX)
}

/// The request's reason, for the approver.
fn reason(d: &DeficitRow) -> String {
    format!(
        "headroom deficit: spare {} of required {} since {}; restore proposed by headroom",
        d.spare,
        d.required,
        format_utc(d.started_at)
    )
}

/// A refusal as a note on the deficit: what the fleet page shows instead of a request.
fn refusal_note(e: &ProvisioningError) -> String {
    match e {
        // The cause chain goes to the log; the note keeps only its outermost words.
        ProvisioningError::Internal(err) => {
            tracing::warn!(error = ?err, "restore proposal could not be filed");
            format!("no restore was filed: {err}")
        }
        other => format!("no restore was filed: {other}"),
    }
}

/// Files the deficit's restore proposal, unless a request for the fleet is already open (then
/// the deficit notes which one) or filing is refused (then it notes why). Sends
/// `fleet.deficit_entered` in the transaction that records the outcome. Never files twice for
/// one deficit: an already settled deficit is left alone.
#[tracing::instrument(skip_all, fields(deficit.id = deficit_id), err)]
pub async fn propose(ctx: &Ctx, deficit_id: i64) -> anyhow::Result<Proposal> {
    let (d, open) = {
        let mut conn = ctx.pool.acquire().await?;
        let Some(d) = fleet_deficits::get(&mut conn, deficit_id).await? else {
            return Ok(Proposal::Settled);
        };
        let open = fleet_deficits::open_request(&mut conn, &d.fleet).await?;
        (d, open)
    };
    if d.provision_id.is_some() || !d.note.is_empty() || d.ended_at.is_some() {
        return Ok(Proposal::Settled);
    }
    let outcome = match open {
        Some(id) => Proposal::AlreadyOpen(id),
        None => file(ctx, &d).await?,
    };
    let (provision_id, note) = match &outcome {
        Proposal::Filed(id) => (Some(*id), String::new()),
        Proposal::AlreadyOpen(id) => (
            Some(*id),
            format!("request #{id} was already open, so no second one was filed"),
        ),
        Proposal::NotFiled(note) => (None, note.clone()),
        Proposal::Settled => return Ok(Proposal::Settled),
    };
    let now = ctx.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    if !fleet_deficits::settle_proposal(&mut tx, d.id, provision_id, &note).await? {
        // Another proposer settled it first (a resume racing a late filing): keep theirs.
        return Ok(Proposal::Settled);
    }
    if let Proposal::Filed(id) = outcome {
        let evidence: serde_json::Value =
            serde_json::from_str(&d.evidence).unwrap_or(serde_json::Value::Null);
        provision_events::append(
            &mut tx,
            NewEvent {
                provision_id: id,
                at: now,
                kind: "evidence",
                machine: None,
                message: &format!(
                    "proposed by headroom for deficit #{}: spare {} of required {} since {}",
                    d.id,
                    d.spare,
                    d.required,
                    format_utc(d.started_at)
                ),
                // yubaba's status answer and our own numbers: nothing from the fleet's secrets.
                details: &json!({ "deficit_id": d.id, "evidence": evidence }),
            },
        )
        .await?;
    }
    notify::enqueue_fleet_event(
        &mut tx,
        ctx,
        now,
        &FleetEvent::DeficitEntered {
            fleet: &d.fleet,
            spare: u32::try_from(d.spare).unwrap_or(0),
            required: u32::try_from(d.required).unwrap_or(0),
            since: d.started_at,
            provision_id,
            note: &note,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(outcome)
}

/// Files the restore request itself; a refusal becomes `NotFiled`, never an error, so one bad
/// template cannot stop a fleet's deficit from being recorded and shown.
async fn file(ctx: &Ctx, d: &DeficitRow) -> anyhow::Result<Proposal> {
    let spec = match crate::fleets::get(ctx, &Caller::system(), &d.fleet).await {
        Ok(f) => f.spec,
        Err(crate::fleets::FleetsError::NotFound(_)) => return Ok(Proposal::Settled),
        Err(e) => return Ok(Proposal::NotFiled(format!("no restore was filed: {e}"))),
    };
    let request = NewRequest {
        fleet: d.fleet.clone(),
        machine_config: spec.restore_machine_config,
        template: None,
        count: i64::from(restore_count(d.spare, d.required)),
        reason: reason(d),
    };
    Ok(
        match requests::create(ctx, &Caller::system(), &request).await {
            Ok(p) => Proposal::Filed(p.id),
            Err(e) => Proposal::NotFiled(refusal_note(&e)),
        },
    )
}

/// Settles a deficit that was left: its own proposal, still awaiting approval, is superseded
/// (nobody needs it any more); one already approved or running goes on, since a person chose
/// it. An operator's request that stood in for the proposal is never touched. Sends
/// `fleet.deficit_left` in the same transaction.
#[tracing::instrument(skip_all, fields(deficit.id = deficit_id), err)]
pub async fn recovered(ctx: &Ctx, deficit_id: i64) -> anyhow::Result<()> {
    let now = ctx.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    let Some(d) = fleet_deficits::get(&mut tx, deficit_id).await? else {
        return Ok(());
    };
    if let (Some(pid), true) = (d.provision_id, d.note.is_empty()) {
        let p = requests::load(&mut tx, pid)
            .await
            .map_err(|e| anyhow::anyhow!("provision {pid}: {e}"))?;
        if let Some(p) = p.filter(|p| {
            p.state == ProvisionState::PendingApproval && p.requester == Actor::System.name()
        }) {
            transition::apply(
                &mut tx,
                ctx,
                now,
                Transition {
                    provision_id: p.id,
                    from: p.state,
                    to: ProvisionState::Superseded,
                    actor: &Actor::System,
                    reason: RECOVERED_REASON,
                    details: json!({ "deficit_id": d.id }),
                },
            )
            .await?;
        }
    }
    let now_row = db::fleet_status::board_one(&mut tx, &d.fleet).await?;
    let numbers = |v: Option<i64>| v.and_then(|n| u32::try_from(n).ok());
    notify::enqueue_fleet_event(
        &mut tx,
        ctx,
        now,
        &FleetEvent::DeficitLeft {
            fleet: &d.fleet,
            spare: numbers(now_row.as_ref().and_then(|r| r.spare)),
            required: numbers(now_row.as_ref().and_then(|r| r.required)),
            since: d.started_at,
            provision_id: d.provision_id,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Files the proposals of open deficits a crash left unfiled (committed, never proposed);
/// returns how many it settled. Called once at start, before the scraper runs.
#[tracing::instrument(skip_all, err)]
pub async fn resume(ctx: &Ctx) -> anyhow::Result<usize> {
    let ids = {
        let mut conn = ctx.pool.acquire().await?;
        fleet_deficits::unfiled(&mut conn).await?
    };
    let mut settled = 0;
    for id in ids {
        if propose(ctx, id).await? != Proposal::Settled {
            settled += 1;
        }
    }
    Ok(settled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_asks_for_the_missing_spares_within_one_request() {
        assert_eq!(restore_count(1, 3), 2);
        assert_eq!(restore_count(0, 1), 1);
        // Never zero (the deficit exists, so at least one is missing) and never over the cap.
        assert_eq!(restore_count(3, 3), 1);
        assert_eq!(restore_count(0, 500), COUNT_MAX);
        assert_eq!(restore_count(i64::MIN, i64::MAX), COUNT_MAX);
    }
}
