//! The runner's queries on `provisions` and `provision_machines`: which request to run next,
//! and one write per machine step. Rows are read as `provisions` reads them (one
//! `ProvisionRow`, and `domain::provision::MachineRecord` for its machines). A request's state is never written here (that is
//! `provisioning::transition`'s job); only machine rows are.

use sqlx::SqliteConnection;

use super::provisions::{ProvisionRow, COLUMNS};
use crate::domain::{MachineStatus, UnixMillis};

/// The oldest approved request still inside its run window (`provisions_by_state`).
pub async fn oldest_approved(
    conn: &mut SqliteConnection,
    now: UnixMillis,
) -> sqlx::Result<Option<ProvisionRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM provisions p
         WHERE p.state = 'approved' AND p.expires_at > ? ORDER BY p.id LIMIT 1"
    );
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(now)
        .fetch_optional(conn)
        .await
}

/// When request `id`'s current window (approval or run) closes.
pub async fn expires_at(conn: &mut SqliteConnection, id: i64) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar("SELECT expires_at FROM provisions WHERE id = ?")
        .bind(id)
        .fetch_optional(conn)
        .await
}

/// Ids of every request in `executing`, oldest first (what a restart must finish).
pub async fn executing_ids(conn: &mut SqliteConnection) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar("SELECT id FROM provisions WHERE state = 'executing' ORDER BY id")
        .fetch_all(conn)
        .await
}

/// What a machine step writes. `None` fields keep their stored value, so a later step never
/// erases what an earlier one learnt (a server id, an address).
#[derive(Debug, Clone, Default)]
pub struct MachineUpdate<'a> {
    pub server_id: Option<i64>,
    pub action_id: Option<i64>,
    pub ipv4: Option<&'a str>,
    pub provider_status: Option<&'a str>,
    /// Set on failure; cleared when the machine moves to any other status.
    pub error: Option<&'a str>,
}

/// Moves one machine to `status` (only from one of `from`), recording what was learnt.
/// Returns whether the row was in one of `from` (and so was written).
pub async fn set_machine(
    conn: &mut SqliteConnection,
    provision_id: i64,
    idx: u32,
    from: &[MachineStatus],
    status: MachineStatus,
    u: &MachineUpdate<'_>,
    now: UnixMillis,
) -> sqlx::Result<bool> {
    // A JSON list keeps the statement static whatever the number of allowed statuses.
    let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
    let from = serde_json::to_string(&from).unwrap_or_else(|_| "[]".into());
    let changed = sqlx::query(
        "UPDATE provision_machines SET status = ?, server_id = COALESCE(?, server_id),
                action_id = COALESCE(?, action_id), ipv4 = COALESCE(?, ipv4),
                provider_status = COALESCE(?, provider_status), error = ?, updated_at = ?
         WHERE provision_id = ? AND idx = ? AND status IN (SELECT value FROM json_each(?))",
    )
    .bind(status.as_str())
    .bind(u.server_id)
    .bind(u.action_id)
    .bind(u.ipv4)
    .bind(u.provider_status)
    .bind(u.error)
    .bind(now)
    .bind(provision_id)
    .bind(idx)
    .bind(from)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(changed == 1)
}
