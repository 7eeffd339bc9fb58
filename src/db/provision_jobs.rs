//! The runner's queries on `provisions` and `provision_machines`: which request to run next,
//! and one write per machine step. Rows are read as `provisions` reads them (one
//! `ProvisionRow`, and `domain::provision::MachineRecord` for its machines). A request's
//! state is never written here (that is `provisioning::transition`'s job); only machine rows
//! are.

use sqlx::AnyConnection;

use super::flag::Flag;
use super::provisions::{ProvisionRow, COLUMNS};
use crate::domain::lease::Held;
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

/// Every `executing` request the runner still has work on, oldest first, with its lease
/// (`None`: never leased, as a request left by a version without leases). With joins
/// followed, a request whose machines were all created is the joins' to finish, not the
/// runner's, and is left out.
pub async fn executing_leases(
    conn: &mut AnyConnection,
    joins_followed: bool,
) -> sqlx::Result<Vec<(i64, Option<Held>)>> {
    let sql = if joins_followed {
        "SELECT p.id, p.runner_id, p.lease_until FROM provisions p
         WHERE p.state = 'executing'
           AND EXISTS (SELECT 1 FROM provision_machines m
                       WHERE m.provision_id = p.id AND m.status <> 'created')
         ORDER BY p.id"
    } else {
        "SELECT p.id, p.runner_id, p.lease_until FROM provisions p
         WHERE p.state = 'executing' ORDER BY p.id"
    };
    let rows: Vec<(i64, Option<String>, Option<i64>)> = sqlx::query_as(sql).fetch_all(conn).await?;
    Ok(rows
        .into_iter()
        .map(|(id, holder, until)| {
            let lease = holder
                .zip(until)
                .map(|(holder, until)| Held { holder, until });
            (id, lease)
        })
        .collect())
}

/// Gives request `id`'s execution to `holder` until `until`, provided it is `executing` and
/// its lease is still as `seen` (compare-and-set). True when it was written.
pub async fn swap_lease(
    conn: &mut AnyConnection,
    id: i64,
    seen: Option<&Held>,
    holder: &str,
    until: UnixMillis,
) -> sqlx::Result<bool> {
    let (seen_holder, seen_until) = match seen {
        Some(h) => (Some(h.holder.as_str()), Some(h.until)),
        None => (None, None),
    };
    let done = sqlx::query(
        "UPDATE provisions SET runner_id = $1, lease_until = $2
         WHERE id = $3 AND state = 'executing'
           AND runner_id IS NOT DISTINCT FROM $4 AND lease_until IS NOT DISTINCT FROM $5",
    )
    .bind(holder)
    .bind(until)
    .bind(id)
    .bind(seen_holder)
    .bind(seen_until)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Moves request `id`'s lease end to `until` if `holder` still holds it. False when another
/// instance took it over: the caller stops working on it.
pub async fn renew_lease(
    conn: &mut AnyConnection,
    id: i64,
    holder: &str,
    until: UnixMillis,
) -> sqlx::Result<bool> {
    let done =
        sqlx::query("UPDATE provisions SET lease_until = $1 WHERE id = $2 AND runner_id = $3")
            .bind(until)
            .bind(id)
            .bind(holder)
            .execute(conn)
            .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether `holder` holds request `id`'s lease at `now`: checked in the transaction of every
/// step that precedes a provider call, so a runner that lost its lease sends nothing more.
pub async fn holds_lease(
    conn: &mut AnyConnection,
    id: i64,
    holder: &str,
    now: UnixMillis,
) -> sqlx::Result<bool> {
    sqlx::query_scalar::<_, Flag>(
        "SELECT EXISTS (SELECT 1 FROM provisions
                        WHERE id = $1 AND runner_id = $2 AND lease_until > $3)",
    )
    .bind(id)
    .bind(holder)
    .bind(now)
    .fetch_one(conn)
    .await
    .map(bool::from)
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
