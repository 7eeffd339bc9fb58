//! A step on a request that is not a state change (an approval short of the number needed, a
//! destroyed machine): its timeline line and its audit entry land together, in the caller's
//! transaction, with the same details. State changes go through `transition` instead.

use sqlx::SqliteConnection;

use crate::audit::{self, Action, NewEntry};
use crate::db::provision_events::{self, NewEvent};
use crate::domain::{Actor, UnixMillis};

/// What happened to a request, for its timeline and the audit log.
#[derive(Debug, Clone)]
pub struct Note<'a> {
    pub provision_id: i64,
    pub at: UnixMillis,
    /// The timeline kind (`approval`, `machine`, …).
    pub kind: &'a str,
    /// The machine it concerns, if one.
    pub machine: Option<&'a str>,
    /// The timeline line, for people.
    pub message: &'a str,
    pub actor: &'a Actor,
    pub action: Action,
    /// Secret-free details, shared by the timeline line and the audit entry.
    pub details: serde_json::Value,
}

/// Writes `note`'s timeline line and audit entry inside the caller's write transaction.
pub async fn write(conn: &mut SqliteConnection, note: Note<'_>) -> sqlx::Result<()> {
    provision_events::append(
        conn,
        NewEvent {
            provision_id: note.provision_id,
            at: note.at,
            kind: note.kind,
            machine: note.machine,
            message: note.message,
            details: &note.details,
        },
    )
    .await?;
    audit::append(
        conn,
        note.at,
        NewEntry {
            actor: note.actor,
            action: note.action,
            target_kind: "provision",
            target_id: &note.provision_id.to_string(),
            details: note.details,
        },
    )
    .await?;
    Ok(())
}
