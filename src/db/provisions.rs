//! The `provisions`, `provision_machines` and `provision_approvals` tables as requests see
//! them: filing a request with its machines, approvals, reads and filtered listings. A request's
//! state is never written here (that is `provisioning::transition`'s job), except `expires_at`,
//! which an approval moves to open the run window.

use sqlx::any::AnyRow;
use std::sync::LazyLock;

use sqlx::{AnyConnection, AssertSqlSafe, FromRow, Row};

use super::sql::Sql;

use crate::domain::provision::{MachineRecord, ProvisionFilter};
use crate::domain::stored::parse_stored_name;
use crate::domain::UnixMillis;

/// A request as stored; `plan` is the JSON of `provisioning::Plan`. The one read model of a
/// `provisions` row: the request pages and the job runner both read it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ProvisionRow {
    pub id: i64,
    pub fleet: String,
    pub machine_config: String,
    pub config_version: i64,
    pub template: String,
    pub template_version: i64,
    pub count: i64,
    pub reason: String,
    pub requester: String,
    pub state: String,
    pub state_reason: String,
    pub plan: String,
    pub plan_hash: String,
    pub approvals_required: i64,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
    pub expires_at: UnixMillis,
    pub approved_at: Option<UnixMillis>,
    pub finished_at: Option<UnixMillis>,
}

/// The columns of [`ProvisionRow`], over `provisions` aliased `p`.
pub(super) const COLUMNS: &str = "p.id, p.fleet, p.machine_config, p.config_version, p.template,
    p.template_version, p.count, p.reason, p.requester, p.state, p.state_reason, p.plan,
    p.plan_hash, p.approvals_required, p.created_at, p.updated_at, p.expires_at, p.approved_at,
    p.finished_at";

/// A request to file (state `pending_approval`).
#[derive(Debug, Clone)]
pub struct NewProvision<'a> {
    pub fleet: &'a str,
    pub machine_config: &'a str,
    pub config_version: i64,
    pub template: &'a str,
    pub template_version: i64,
    pub count: i64,
    pub reason: &'a str,
    pub requester: &'a str,
    pub plan: &'a str,
    pub plan_hash: &'a str,
    pub approvals_required: i64,
    pub now: UnixMillis,
    pub expires_at: UnixMillis,
}

/// Inserts a request in `pending_approval`; returns its id.
pub async fn insert(conn: &mut AnyConnection, p: &NewProvision<'_>) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "INSERT INTO provisions (fleet, machine_config, config_version, template,
            template_version, count, reason, requester, state, plan, plan_hash,
            approvals_required, created_at, updated_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending_approval', $9, $10, $11, $12, $13, $14) RETURNING id",
    )
    .bind(p.fleet)
    .bind(p.machine_config)
    .bind(p.config_version)
    .bind(p.template)
    .bind(p.template_version)
    .bind(p.count)
    .bind(p.reason)
    .bind(p.requester)
    .bind(p.plan)
    .bind(p.plan_hash)
    .bind(p.approvals_required)
    .bind(p.now)
    .bind(p.now)
    .bind(p.expires_at)
    .fetch_one(conn)
    .await
}

/// One planned machine to insert (status `planned`).
#[derive(Debug, Clone)]
pub struct NewMachine<'a> {
    pub idx: u32,
    pub name: &'a str,
    pub sha256: &'a str,
    /// At most the 32 KiB a payload may have, so it fits a SQLite integer.
    pub size_bytes: u32,
    /// As shown and approved: `«secret:NAME»` where each secret's value goes.
    pub redacted_payload: &'a str,
}

/// Inserts a request's planned machine.
pub async fn insert_machine(
    conn: &mut AnyConnection,
    provision_id: i64,
    m: &NewMachine<'_>,
    now: UnixMillis,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO provision_machines (provision_id, idx, name, sha256, size_bytes,
            redacted_payload, status, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, 'planned', $7)",
    )
    .bind(provision_id)
    .bind(i64::from(m.idx))
    .bind(m.name)
    .bind(m.sha256)
    .bind(i64::from(m.size_bytes))
    .bind(m.redacted_payload)
    .bind(now)
    .execute(conn)
    .await
    .map(|_| ())
}

/// Whether a machine name is already used by any request (`provision_machines_name`).
pub async fn machine_name_taken(conn: &mut AnyConnection, name: &str) -> sqlx::Result<bool> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM provision_machines WHERE name = $1")
        .bind(name)
        .fetch_one(conn)
        .await?;
    Ok(n > 0)
}

/// One request.
pub async fn get(conn: &mut AnyConnection, id: i64) -> sqlx::Result<Option<ProvisionRow>> {
    let sql = format!("SELECT {COLUMNS} FROM provisions p WHERE p.id = $1");
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(conn)
        .await
}

/// Who approved a request's plan `plan_hash`, in the order they did (approvals in the same
/// millisecond by name: PostgreSQL has no insertion order to fall back on).
pub async fn approvers(
    conn: &mut AnyConnection,
    id: i64,
    plan_hash: &str,
) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT approver FROM provision_approvals WHERE provision_id = $1 AND plan_hash = $2
         ORDER BY approved_at, approver",
    )
    .bind(id)
    .bind(plan_hash)
    .fetch_all(conn)
    .await
}

/// Records an approval of plan `plan_hash`; `false` when this approver already approved.
pub async fn insert_approval(
    conn: &mut AnyConnection,
    id: i64,
    approver: &str,
    plan_hash: &str,
    now: UnixMillis,
) -> sqlx::Result<bool> {
    let done = sqlx::query(
        // With copies of the request's filter columns, so "approved by" and another filter
        // seek the approval indexes (migration 0020; the state follows by trigger).
        "INSERT INTO provision_approvals (provision_id, approver, plan_hash, approved_at,
                                          fleet, machine_config, requester, state)
         SELECT $1, $2, $3, $4, fleet, machine_config, requester, state FROM provisions
         WHERE id = $1
         ON CONFLICT (provision_id, approver) DO NOTHING",
    )
    .bind(id)
    .bind(approver)
    .bind(plan_hash)
    .bind(now)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(done == 1)
}

/// Moves the end of a request's window (an approval opens the run window).
pub async fn set_expires_at(
    conn: &mut AnyConnection,
    id: i64,
    expires_at: UnixMillis,
) -> sqlx::Result<()> {
    sqlx::query("UPDATE provisions SET expires_at = $1 WHERE id = $2")
        .bind(expires_at)
        .bind(id)
        .execute(conn)
        .await
        .map(|_| ())
}

impl FromRow<'_, AnyRow> for MachineRecord {
    // By hand for the typed columns: each stored value is parsed here, once, and one that
    // does not read back is an error naming its column and value, never a default.
    fn from_row(r: &AnyRow) -> sqlx::Result<Self> {
        fn stored<T>(column: &'static str, raw: &str, parsed: Option<T>) -> sqlx::Result<T> {
            parse_stored_name(column, raw, |_| parsed).map_err(|e| sqlx::Error::ColumnDecode {
                index: column.into(),
                source: e.into(),
            })
        }
        let status: String = r.try_get("status")?;
        let idx: i64 = r.try_get("idx")?;
        let size_bytes: i64 = r.try_get("size_bytes")?;
        Ok(MachineRecord {
            idx: stored(
                "provision_machines.idx",
                &idx.to_string(),
                u32::try_from(idx).ok(),
            )?,
            name: r.try_get("name")?,
            sha256: r.try_get("sha256")?,
            size_bytes: stored(
                "provision_machines.size_bytes",
                &size_bytes.to_string(),
                usize::try_from(size_bytes).ok(),
            )?,
            status: stored("provision_machines.status", &status, status.parse().ok())?,
            server_id: r.try_get("server_id")?,
            action_id: r.try_get("action_id")?,
            ipv4: r.try_get("ipv4")?,
            provider_status: r.try_get("provider_status")?,
            error: r.try_get("error")?,
            updated_at: r.try_get("updated_at")?,
            joined_at: r.try_get("joined_at")?,
            member_id: r.try_get("member_id")?,
        })
    }
}

const MACHINE_COLUMNS: &str = "provision_id, idx, name, sha256, size_bytes,
    status, server_id, action_id, ipv4, provider_status, error, updated_at, joined_at, member_id";

/// A machine with the id of the request it belongs to (a listing page reads many requests').
fn machine_of_request(r: &AnyRow) -> sqlx::Result<(i64, MachineRecord)> {
    Ok((r.try_get("provision_id")?, MachineRecord::from_row(r)?))
}

/// A request's machines, by index.
pub async fn machines(conn: &mut AnyConnection, id: i64) -> sqlx::Result<Vec<MachineRecord>> {
    let sql = format!(
        "SELECT {MACHINE_COLUMNS} FROM provision_machines WHERE provision_id = $1 ORDER BY idx"
    );
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_all(conn)
        .await
}

/// The machines of many requests at once (a listing page), as (provision id, machine) pairs
/// ordered by request and index: one query through the primary key.
pub async fn machines_of(
    conn: &mut AnyConnection,
    ids: &[i64],
) -> sqlx::Result<Vec<(i64, MachineRecord)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = Sql::new(format!(
        "SELECT {MACHINE_COLUMNS} FROM provision_machines WHERE provision_id IN "
    ));
    q.push_list(ids.iter().copied())
        .push(" ORDER BY provision_id, idx");
    let (sql, args) = q.finish()?;
    // Not kept prepared: the text changes with the number of ids, and every length kept
    // would hold a statement on each pooled connection.
    let rows = sqlx::query_with(AssertSqlSafe(sql), args)
        .persistent(false)
        .fetch_all(conn)
        .await?;
    rows.iter().map(machine_of_request).collect()
}

/// How a listing walks the history, chosen from its filters (see [`list_query`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// Newest id first, through the primary key or an equality filter's `(column, id)` index.
    Ids,
    /// A time bound (and no approver): in time order from the cursor's time, through
    /// `provisions_by_created` or an equality filter's `(column, created_at, id)` index.
    Time,
    /// An approver (and no time bound): their approvals, newest request first, through the
    /// `(approver, column, provision_id)` index of another equality filter if there is one.
    Approvals,
}

impl Walk {
    fn of(f: &ProvisionFilter) -> Walk {
        if (f.from.is_some() || f.to.is_some()) && f.approver.is_none() {
            Walk::Time
        } else if f.approver.is_some() && f.from.is_none() && f.to.is_none() {
            Walk::Approvals
        } else {
            Walk::Ids
        }
    }
}

/// The cursor of a listing: the id a page gave out, with that request's `created_at` when
/// the walk is in time order (`None` when that request does not exist).
#[derive(Debug, Clone, Copy)]
struct Before {
    id: i64,
    created_at: Option<UnixMillis>,
}

fn push_filter(q: &mut Sql, f: &ProvisionFilter, walk: Walk, before: Option<Before>) {
    q.push(" WHERE 1 = 1");
    // Walking approvals, the equality filters are asked of the approval's copies of the
    // request's columns, which the `(approver, column, provision_id)` indexes answer.
    let on_approvals = walk == Walk::Approvals;
    // Static text per alias, so nothing a caller wrote can reach the SQL text.
    let column = |approval: &'static str, request: &'static str| {
        if on_approvals {
            approval
        } else {
            request
        }
    };
    if let Some(v) = &f.fleet {
        q.push(column(" AND a.fleet = ", " AND p.fleet = "))
            .push_bind(v.clone());
    }
    if let Some(v) = &f.machine_config {
        q.push(column(
            " AND a.machine_config = ",
            " AND p.machine_config = ",
        ))
        .push_bind(v.clone());
    }
    if let Some(v) = f.state {
        q.push(column(" AND a.state = ", " AND p.state = "))
            .push_bind(v.as_str());
    }
    if let Some(v) = &f.requester {
        q.push(column(" AND a.requester = ", " AND p.requester = "))
            .push_bind(v.clone());
    }
    if let Some(v) = &f.approver {
        if walk == Walk::Approvals {
            q.push(" AND a.approver = ").push_bind(v.clone());
        } else {
            // One primary-key probe of `provision_approvals` per request walked.
            q.push(" AND EXISTS (SELECT 1 FROM provision_approvals a WHERE a.provision_id = p.id AND a.approver = ")
                .push_bind(v.clone())
                .push(")");
        }
    }
    let mut to = f.to;
    if let Some(Before {
        created_at: Some(at),
        ..
    }) = before.filter(|_| walk == Walk::Time)
    {
        // Start at the cursor's time, not at `to`: a deep page does not walk the ones before.
        to = Some(to.map_or(at + 1, |t| t.min(at + 1)));
    }
    if let Some(v) = f.from {
        q.push(" AND p.created_at >= ").push_bind(v);
    }
    if let Some(v) = to {
        q.push(" AND p.created_at < ").push_bind(v);
    }
    match (before, walk) {
        (None, _) => {}
        (Some(b), Walk::Approvals) => {
            q.push(" AND a.provision_id < ").push_bind(b.id);
        }
        (
            Some(Before {
                id,
                created_at: Some(at),
            }),
            Walk::Time,
        ) => {
            q.push(" AND (p.created_at < ")
                .push_bind(at)
                .push(" OR p.id < ")
                .push_bind(id)
                .push(")");
        }
        (Some(b), _) => {
            q.push(" AND p.id < ").push_bind(b.id);
        }
    }
}

/// The listing's query, newest first.
///
/// Every equality filter has an `(column, id)` index, so SQLite seeks the filter and walks
/// `id` downwards from the cursor: a page costs the same however long the history is. With no
/// filter it walks the primary key backwards. An approver walks their approvals newest
/// request first (`provision_approvals_by_approver`), or with another equality filter the
/// approvals of requests matching it (`provision_approvals_by_approver_fleet`, `_config`,
/// `_requester`, `_state`, on the approval's copies of those columns), so a combination no
/// request matches costs a seek, not a walk of every approval given. A time bound walks
/// `provisions_by_created` in time order (the id order, requests being filed as they come),
/// or with an equality filter that filter's `(column, created_at, id)` index (migration 0022),
/// from the cursor's time; walking ids would first pass every newer request.
/// [`explain_list`] shows the plan (tested; `benches/history.rs` times it).
fn list_query(prefix: &str, f: &ProvisionFilter, before: Option<Before>, limit: i64) -> Sql {
    let walk = Walk::of(f);
    let from = match walk {
        Walk::Approvals => "provision_approvals a JOIN provisions p ON p.id = a.provision_id",
        Walk::Ids | Walk::Time => "provisions p",
    };
    let mut q = Sql::new(format!("{prefix}SELECT {COLUMNS} FROM {from}"));
    push_filter(&mut q, f, walk, before);
    q.push(match walk {
        Walk::Ids => " ORDER BY p.id DESC LIMIT ",
        Walk::Time => " ORDER BY p.created_at DESC, p.id DESC LIMIT ",
        Walk::Approvals => " ORDER BY a.provision_id DESC LIMIT ",
    })
    .push_bind(limit);
    q
}

/// The cursor `before` as [`list_query`] needs it for `f` (a time walk reads its time).
async fn cursor(
    conn: &mut AnyConnection,
    f: &ProvisionFilter,
    before: Option<i64>,
) -> sqlx::Result<Option<Before>> {
    let Some(id) = before else {
        return Ok(None);
    };
    let created_at = if Walk::of(f) == Walk::Time {
        sqlx::query_scalar("SELECT created_at FROM provisions WHERE id = $1")
            .bind(id)
            .fetch_optional(conn)
            .await?
    } else {
        None
    };
    Ok(Some(Before { id, created_at }))
}

/// SQLite's `EXPLAIN QUERY PLAN` of a listing, one line per step.
pub async fn explain_list(
    conn: &mut AnyConnection,
    f: &ProvisionFilter,
    before: Option<i64>,
) -> sqlx::Result<Vec<String>> {
    let before = cursor(conn, f, before).await?;
    let (sql, args) = list_query("EXPLAIN QUERY PLAN ", f, before, 50).finish()?;
    let rows = sqlx::query_with(AssertSqlSafe(sql), args)
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|r| r.try_get::<String, _>("detail"))
        .collect()
}

/// A newest-first page of requests matching `f` with id below `before`.
pub async fn list(
    conn: &mut AnyConnection,
    f: &ProvisionFilter,
    before: Option<i64>,
    limit: i64,
) -> sqlx::Result<Vec<ProvisionRow>> {
    let before = cursor(conn, f, before).await?;
    let (sql, args) = list_query("", f, before, limit).finish()?;
    sqlx::query_as_with(AssertSqlSafe(sql), args)
        .fetch_all(conn)
        .await
}

/// The approvers of many requests at once (for a listing page), as (provision id, approver)
/// pairs in approval order. Only approvals of each request's current plan count.
pub async fn approvers_of(
    conn: &mut AnyConnection,
    ids: &[i64],
) -> sqlx::Result<Vec<(i64, String)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = Sql::new(
        "SELECT a.provision_id, a.approver FROM provision_approvals a
         JOIN provisions p ON p.id = a.provision_id AND p.plan_hash = a.plan_hash
         WHERE a.provision_id IN ",
    );
    q.push_list(ids.iter().copied())
        .push(" ORDER BY a.approved_at, a.approver");
    let (sql, args) = q.finish()?;
    // Not kept prepared, like `machines_of`: one text per number of ids.
    sqlx::query_as_with(AssertSqlSafe(sql), args)
        .persistent(false)
        .fetch_all(conn)
        .await
}

/// Requests in `pending_approval` that `user` may approve now: not their own, not already
/// approved by them, and they wrote neither the config version nor the template version the
/// plan uses (four-eyes), and its window is still open at `now`.
pub async fn approvable_by(
    conn: &mut AnyConnection,
    user: &str,
    now: UnixMillis,
) -> sqlx::Result<u64> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM provisions p
         WHERE p.state = 'pending_approval' AND p.requester <> $1 AND p.expires_at > $2
           AND NOT EXISTS (SELECT 1 FROM provision_approvals a
                           WHERE a.provision_id = p.id AND a.approver = $1)
           AND NOT EXISTS (SELECT 1 FROM machine_config_versions v
                           JOIN machine_configs h ON h.id = v.config_id
                           WHERE h.name = p.machine_config AND v.version = p.config_version
                             AND v.author = $1)
           AND NOT EXISTS (SELECT 1 FROM template_versions v
                           JOIN templates h ON h.id = v.template_id
                           WHERE h.name = p.template AND v.version = p.template_version
                             AND v.author = $1)
           AND NOT (p.requester = 'system'
                    AND EXISTS (SELECT 1 FROM provision_causes c
                                WHERE c.provision_id = p.id AND c.changed_by = $1))",
    )
    .bind(user)
    .bind(now)
    .fetch_one(conn)
    .await?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Requests waiting for approval or to run whose window closed at or before `now`, with the
/// state each was read in (`provisions_by_state`).
pub async fn due_for_expiry(
    conn: &mut AnyConnection,
    now: UnixMillis,
) -> sqlx::Result<Vec<(i64, String)>> {
    sqlx::query_as(
        "SELECT id, state FROM provisions
         WHERE state IN ('pending_approval', 'approved') AND expires_at <= $1 ORDER BY id",
    )
    .bind(now)
    .fetch_all(conn)
    .await
}

/// The machines of fleet `fleet`'s requests other than `except` that still have a server (one
/// was created and not destroyed: booting, created, or failed after creation), as (how many,
/// the plan's per-machine `monthly_price`, '' when it has none) per price. Reads the fleet's
/// rows of `fleet_running_machines` (kept by triggers, migration 0021) less `except`'s own
/// machines: a few rows whatever the fleet's history.
pub async fn running_machines_of_fleet(
    conn: &mut AnyConnection,
    fleet: &str,
    except: i64,
) -> sqlx::Result<Vec<(i64, String)>> {
    let sql = super::Dialect::of(conn).pick(RUNNING_SQLITE.as_str(), RUNNING_POSTGRES.as_str());
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(fleet)
        .bind(except)
        .fetch_all(conn)
        .await
}

/// [`running_machines_of_fleet`]'s statement with the plan's `monthly_price` read by `price`
/// (each store reads a JSON member its own way).
fn running_sql(price: &str) -> String {
    format!(
        "WITH own AS (
             SELECT COALESCE({price}, '') AS price, COUNT(*) AS n
             FROM provisions p JOIN provision_machines m ON m.provision_id = p.id
             WHERE p.id = $2 AND p.fleet = $1 AND m.server_id IS NOT NULL
               AND m.status != 'destroyed'
             GROUP BY 1),
         fleet AS (
             SELECT r.machines - COALESCE((SELECT n FROM own WHERE own.price = r.monthly_price), 0)
                        AS running,
                    r.monthly_price
             FROM fleet_running_machines r
             WHERE r.fleet = $1)
         SELECT running, monthly_price FROM fleet WHERE running > 0 ORDER BY monthly_price"
    )
}

static RUNNING_SQLITE: LazyLock<String> =
    LazyLock::new(|| running_sql("json_extract(p.plan, '$.monthly_price')"));
static RUNNING_POSTGRES: LazyLock<String> =
    LazyLock::new(|| running_sql("p.plan::json ->> 'monthly_price'"));

/// Every machine's redacted payload of request `id`, in machine order.
pub async fn redacted_payloads(conn: &mut AnyConnection, id: i64) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT redacted_payload FROM provision_machines WHERE provision_id = $1 ORDER BY idx",
    )
    .bind(id)
    .fetch_all(conn)
    .await
}

/// The redacted payload of the newest succeeded request of a machine config (the preview's
/// "diff against the last successful provision").
pub async fn last_succeeded_payload(
    conn: &mut AnyConnection,
    machine_config: &str,
) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar(
        "SELECT m.redacted_payload FROM provisions p
         JOIN provision_machines m ON m.provision_id = p.id AND m.idx = 0
         WHERE p.machine_config = $1 AND p.state = 'succeeded'
         ORDER BY p.id DESC LIMIT 1",
    )
    .bind(machine_config)
    .fetch_optional(conn)
    .await
}
