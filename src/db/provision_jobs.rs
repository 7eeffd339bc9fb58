//! The runner's queries on `provisions` and `provision_machines`: which request to run next,
//! and one write per machine step. A request's state is never written here (that is
//! `provisioning::transition`'s job); only machine rows are.

use sqlx::{Row, SqliteConnection};

use crate::domain::{MachineStatus, UnixMillis};

/// The columns of a request the runner needs.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    pub id: i64,
    pub fleet: String,
    pub machine_config: String,
    pub config_version: i64,
    pub template: String,
    pub template_version: i64,
    pub state: String,
    /// The plan as stored (JSON of `provisioning::Plan`).
    pub plan: String,
    pub plan_hash: String,
    pub created_at: UnixMillis,
    pub expires_at: UnixMillis,
}

const JOB_COLUMNS: &str = "id, fleet, machine_config, config_version, template, template_version,
     state, plan, plan_hash, created_at, expires_at";

fn job_from(r: &sqlx::sqlite::SqliteRow) -> sqlx::Result<JobRow> {
    Ok(JobRow {
        id: r.try_get(0)?,
        fleet: r.try_get(1)?,
        machine_config: r.try_get(2)?,
        config_version: r.try_get(3)?,
        template: r.try_get(4)?,
        template_version: r.try_get(5)?,
        state: r.try_get(6)?,
        plan: r.try_get(7)?,
        plan_hash: r.try_get(8)?,
        created_at: r.try_get(9)?,
        expires_at: r.try_get(10)?,
    })
}

/// The oldest approved request still inside its run window (`provisions_by_state`).
pub async fn oldest_approved(
    conn: &mut SqliteConnection,
    now: UnixMillis,
) -> sqlx::Result<Option<JobRow>> {
    let sql = format!(
        "SELECT {JOB_COLUMNS} FROM provisions
         WHERE state = 'approved' AND expires_at > ? ORDER BY id LIMIT 1"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(now)
        .fetch_optional(conn)
        .await?
        .as_ref()
        .map(job_from)
        .transpose()
}

/// One request.
pub async fn job(conn: &mut SqliteConnection, id: i64) -> sqlx::Result<Option<JobRow>> {
    let sql = format!("SELECT {JOB_COLUMNS} FROM provisions WHERE id = ?");
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(conn)
        .await?
        .as_ref()
        .map(job_from)
        .transpose()
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

/// A machine row as the runner reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineRow {
    pub idx: i64,
    pub name: String,
    pub sha256: String,
    pub status: MachineStatus,
    pub server_id: Option<i64>,
    pub action_id: Option<i64>,
    pub ipv4: Option<String>,
    pub provider_status: Option<String>,
    pub error: Option<String>,
}

/// A request's machines, by index.
pub async fn machines(
    conn: &mut SqliteConnection,
    provision_id: i64,
) -> anyhow::Result<Vec<MachineRow>> {
    let rows = sqlx::query(
        "SELECT idx, name, sha256, status, server_id, action_id, ipv4, provider_status, error
         FROM provision_machines WHERE provision_id = ? ORDER BY idx",
    )
    .bind(provision_id)
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|r| {
            let status: String = r.try_get(3)?;
            Ok(MachineRow {
                idx: r.try_get(0)?,
                name: r.try_get(1)?,
                sha256: r.try_get(2)?,
                status: status
                    .parse()
                    .map_err(|()| anyhow::anyhow!("unknown machine status {status:?}"))?,
                server_id: r.try_get(4)?,
                action_id: r.try_get(5)?,
                ipv4: r.try_get(6)?,
                provider_status: r.try_get(7)?,
                error: r.try_get(8)?,
            })
        })
        .collect()
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
    idx: i64,
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
