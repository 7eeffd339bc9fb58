//! The one place a request's state is written. A transition is a compare-and-set on the
//! current state (so two approvers, two clicks or two runners cannot both move it), checked
//! against `ProvisionState::can_become`, and lands with its timeline line, its audit entry and
//! its webhook notification in the caller's transaction.

use serde_json::json;
use sqlx::AnyConnection;

use super::notify;
use crate::audit::{self, Action, NewEntry};
use crate::context::Ctx;
use crate::db::provision_events::{self, NewEvent};
use crate::domain::{Actor, ProvisionState, UnixMillis};
use crate::error::OpError;

/// A state change to make.
#[derive(Debug, Clone)]
pub struct Transition<'a> {
    pub provision_id: i64,
    /// The state the caller read; the write happens only if it is still the state.
    pub from: ProvisionState,
    pub to: ProvisionState,
    pub actor: &'a Actor,
    /// Why, for people; stored as the request's `state_reason` (may be empty).
    pub reason: &'a str,
    /// Extra audit details (already secret-free).
    pub details: serde_json::Value,
}

impl<'a> Transition<'a> {
    /// A move with no audit details beyond the two states and the reason: what a person's
    /// reject or cancel, the runner's claim and the expiry sweeps all make.
    pub fn plain(
        provision_id: i64,
        from: ProvisionState,
        to: ProvisionState,
        actor: &'a Actor,
        reason: &'a str,
    ) -> Self {
        Transition {
            provision_id,
            from,
            to,
            actor,
            reason,
            details: json!({}),
        }
    }
}

/// Whether the transition was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written, with its event, audit entry and notification.
    Moved,
    /// The request was no longer in `from` (someone else moved it first): nothing written.
    Lost,
}

impl Outcome {
    /// For a person's action: losing the race to someone else is the conflict they are told of.
    pub fn or_conflict(self, provision_id: i64) -> Result<(), OpError> {
        match self {
            Outcome::Moved => Ok(()),
            Outcome::Lost => Err(OpError::Conflict(format!(
                "provision {provision_id} was moved by someone else meanwhile"
            ))),
        }
    }
}

/// The audit action that records arriving in `to`.
pub fn action_for(to: ProvisionState) -> Option<Action> {
    Some(match to {
        ProvisionState::PendingApproval => return None,
        ProvisionState::Approved => Action::ProvisionApproved,
        ProvisionState::Executing => Action::ProvisionStarted,
        ProvisionState::Succeeded => Action::ProvisionSucceeded,
        ProvisionState::Failed => Action::ProvisionFailed,
        ProvisionState::Rejected => Action::ProvisionRejected,
        ProvisionState::Expired => Action::ProvisionExpired,
        ProvisionState::Cancelled => Action::ProvisionCancelled,
        ProvisionState::Superseded => Action::ProvisionSuperseded,
    })
}

/// Moves a request from `t.from` to `t.to` inside the caller's write transaction.
///
/// # Panics
/// Never at run time for a valid caller: an impossible transition is a programming error and
/// is refused with an error, not a panic.
pub async fn apply(
    conn: &mut AnyConnection,
    ctx: &Ctx,
    now: UnixMillis,
    t: Transition<'_>,
) -> anyhow::Result<Outcome> {
    anyhow::ensure!(
        t.from.can_become(t.to),
        "provision {}: {} cannot become {}",
        t.provision_id,
        t.from,
        t.to
    );
    let finished = t.to.is_terminal().then_some(now);
    let approved = (t.to == ProvisionState::Approved).then_some(now);
    let changed = sqlx::query(
        "UPDATE provisions SET state = $1, state_reason = $2, updated_at = $3,
                finished_at = COALESCE($4, finished_at), approved_at = COALESCE($5, approved_at)
         WHERE id = $6 AND state = $7",
    )
    .bind(t.to.as_str())
    .bind(t.reason)
    .bind(now)
    .bind(finished)
    .bind(approved)
    .bind(t.provision_id)
    .bind(t.from.as_str())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if changed == 0 {
        return Ok(Outcome::Lost);
    }
    let message = if t.reason.is_empty() {
        format!("{} → {} by {}", t.from, t.to, t.actor.name())
    } else {
        format!("{} → {} by {}: {}", t.from, t.to, t.actor.name(), t.reason)
    };
    provision_events::append(
        conn,
        NewEvent {
            provision_id: t.provision_id,
            at: now,
            kind: "state",
            machine: None,
            message: &message,
            details: &json!({ "from": t.from.as_str(), "to": t.to.as_str() }),
        },
    )
    .await?;
    if let Some(action) = action_for(t.to) {
        let mut details = json!({ "from": t.from.as_str(), "to": t.to.as_str() });
        if !t.reason.is_empty() {
            details["reason"] = json!(t.reason);
        }
        if let (Some(d), Some(extra)) = (details.as_object_mut(), t.details.as_object()) {
            d.extend(extra.clone());
        }
        audit::append(
            conn,
            now,
            NewEntry {
                actor: t.actor,
                action,
                target_kind: "provision",
                target_id: &t.provision_id.to_string(),
                details,
            },
        )
        .await?;
    }
    if let Some(event) = notify::Event::for_state(t.to) {
        notify::enqueue(conn, ctx, now, event, t.provision_id).await?;
    }
    // A request that opens or closes changes the fleet board's open-request counts. Before
    // the caller's commit: a board read in between may cache the old counts, for at most
    // the board's ttl.
    ctx.board.invalidate();
    Ok(Outcome::Moved)
}
