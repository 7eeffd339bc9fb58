//! The runner's queries on `provisions` and `provision_machines`: which request to run next,
//! and one write per machine step. Rows are read as `provisions` reads them (one
//! `ProvisionRow`, and `domain::provision::MachineRecord` for its machines). A request's
//! state is never written here (that is `provisioning::transition`'s job); only machine rows
//! are.

use sqlx::AnyConnection;

use super::provisions::{ProvisionRow, COLUMNS};
use crate::domain::{MachineStatus, UnixMillis};

/// The oldest approved request still inside its run window (`provisions_by_state`).
pub async fn oldest_approved(
    conn: &mut AnyConnection,
    now: UnixMillis,
) -> sqlx::Result<Option<ProvisionRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM provisions p
         WHERE p.state = 'approved' AND p.expires_at > $1 ORDER BY p.id LIMIT 1"
    );
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(now)
        .fetch_optional(conn)
        .await
}

/// When request `id`'s current window (approval or run) closes.
pub async fn expires_at(conn: &mut AnyConnection, id: i64) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar("SELECT expires_at FROM provisions WHERE id = $1")
        .bind(id)
        .fetch_optional(conn)
        .await
}

/// Ids of every request in `executing`, oldest first (what a restart must finish).
pub async fn executing_ids(conn: &mut AnyConnection) -> sqlx::Result<Vec<i64>> {
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
    conn: &mut AnyConnection,
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
    let sql = super::Dialect::of(conn).pick(
        "UPDATE provision_machines SET status = $1, server_id = COALESCE($2, server_id),
                    action_id = COALESCE($3, action_id), ipv4 = COALESCE($4, ipv4),
                    provider_status = COALESCE($5, provider_status), error = $6, updated_at = $7
             WHERE provision_id = $8 AND idx = $9
               AND status IN (SELECT value FROM json_each($10))",
        "UPDATE provision_machines SET status = $1, server_id = COALESCE($2, server_id),
                    action_id = COALESCE($3, action_id), ipv4 = COALESCE($4, ipv4),
                    provider_status = COALESCE($5, provider_status), error = $6, updated_at = $7
             WHERE provision_id = $8 AND idx = $9
               AND status IN (SELECT json_array_elements_text($10::json))",
    );
    let changed = sqlx::query(sql)
        .bind(status.as_str())
        .bind(u.server_id)
        .bind(u.action_id)
        .bind(u.ipv4)
        .bind(u.provider_status)
        .bind(u.error)
        .bind(now)
        .bind(provision_id)
        .bind(i64::from(idx))
        .bind(from)
        .execute(conn)
        .await?
        .rows_affected();
    Ok(changed == 1)
}

/// A created machine of an `executing` request that has not joined its fleet yet.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AwaitingJoin {
    pub provision_id: i64,
    pub idx: i64,
    pub name: String,
}

/// The machines of `fleet` waiting to join: created, not yet seen as members, in `executing`
/// requests whose every machine was created (a request still creating is the runner's).
/// Through `provisions_by_fleet_state`, so the cost follows the fleet's open requests.
pub async fn awaiting_join(
    conn: &mut AnyConnection,
    fleet: &str,
) -> sqlx::Result<Vec<AwaitingJoin>> {
    sqlx::query_as(
        "SELECT m.provision_id, m.idx, m.name FROM provisions p
         JOIN provision_machines m ON m.provision_id = p.id
         WHERE p.fleet = $1 AND p.state = 'executing'
           AND m.status = 'created' AND m.joined_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM provision_machines o
                           WHERE o.provision_id = p.id AND o.status <> 'created')
         ORDER BY m.provision_id, m.idx",
    )
    .bind(fleet)
    .fetch_all(conn)
    .await
}

/// Records that machine `idx` of request `provision_id` joined as member `member_id`; false
/// when it had joined already (a second follower lost the race).
pub async fn mark_joined(
    conn: &mut AnyConnection,
    provision_id: i64,
    idx: i64,
    member_id: i64,
    at: UnixMillis,
) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "UPDATE provision_machines SET joined_at = $1, member_id = $2
         WHERE provision_id = $3 AND idx = $4 AND status = 'created' AND joined_at IS NULL",
    )
    .bind(at)
    .bind(member_id)
    .bind(provision_id)
    .bind(idx)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// How many machines of request `provision_id` have not joined.
pub async fn unjoined(conn: &mut AnyConnection, provision_id: i64) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM provision_machines WHERE provision_id = $1 AND joined_at IS NULL",
    )
    .bind(provision_id)
    .fetch_one(conn)
    .await
}

/// `executing` requests whose machines were all created by `cutoff` (the newest creation no
/// later) and some of which have still not joined: their join time is up.
pub async fn join_overdue(conn: &mut AnyConnection, cutoff: UnixMillis) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar(
        "SELECT p.id FROM provisions p
         JOIN provision_machines m ON m.provision_id = p.id
         WHERE p.state = 'executing'
         GROUP BY p.id
         HAVING SUM(CASE WHEN m.status <> 'created' THEN 1 ELSE 0 END) = 0
            AND SUM(CASE WHEN m.joined_at IS NULL THEN 1 ELSE 0 END) > 0
            AND MAX(m.updated_at) <= $1
         ORDER BY p.id",
    )
    .bind(cutoff)
    .fetch_all(conn)
    .await
}
