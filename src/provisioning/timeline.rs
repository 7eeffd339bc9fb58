//! A step on a request that is not a state change (an approval short of the number needed, a
//! destroyed machine): its timeline line and its audit entry land together, in the caller's
//! transaction, with the same details. State changes go through `transition` instead.

use sqlx::AnyConnection;

use crate::audit::{self, Action, NewEntry};
use crate::db::provision_events::{self, NewEvent};
use crate::domain::Actor;

/// What happened to a request: its timeline line, and who the audit entry names for it.
#[derive(Debug, Clone)]
pub struct Note<'a> {
    /// The timeline line; its request, time and details are the audit entry's too.
    pub event: NewEvent<'a>,
    pub actor: &'a Actor,
    pub action: Action,
}

/// Writes `note`'s timeline line and audit entry inside the caller's write transaction.
pub async fn write(conn: &mut AnyConnection, note: Note<'_>) -> sqlx::Result<()> {
    let Note {
        event,
        actor,
        action,
    } = note;
    provision_events::append(conn, event.clone()).await?;
    audit::append(
        conn,
        event.at,
        NewEntry {
            actor,
            action,
            target_kind: "provision",
            target_id: &event.provision_id.to_string(),
            details: event.details.clone(),
        },
    )
    .await?;
    Ok(())
}
