//! Webhook notifications: an outbox row written in the transaction of the change it reports,
//! delivered (signed, retried with backoff, recorded) by a background loop, so a failing
//! receiver never blocks a provision.

use sqlx::SqliteConnection;

use crate::context::Ctx;
use crate::domain::{ProvisionState, UnixMillis};

/// What a notification reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// `provision.requested`
    Requested,
    /// `provision.approved`
    Approved,
    /// `provision.rejected`
    Rejected,
    /// `provision.expired`
    Expired,
    /// `provision.finished` (succeeded or failed)
    Finished,
}

impl Event {
    /// The notification a request's arrival in `state` sends, if any.
    pub fn for_state(state: ProvisionState) -> Option<Event> {
        match state {
            ProvisionState::PendingApproval => Some(Event::Requested),
            ProvisionState::Approved => Some(Event::Approved),
            ProvisionState::Rejected => Some(Event::Rejected),
            ProvisionState::Expired => Some(Event::Expired),
            ProvisionState::Succeeded | ProvisionState::Failed => Some(Event::Finished),
            _ => None,
        }
    }
}

/// Queues a notification about a request, when a webhook is configured. Call inside the
/// write transaction of the change it reports.
pub async fn enqueue(
    _conn: &mut SqliteConnection,
    _ctx: &Ctx,
    _now: UnixMillis,
    _event: Event,
    _provision_id: i64,
) -> anyhow::Result<()> {
    // Filled in by the webhook work (same commit series): until a webhook URL is configurable
    // there is nothing to queue.
    Ok(())
}
