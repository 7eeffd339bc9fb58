//! The webhook outbox (`webhook_deliveries`): rows written in the transaction of the change
//! they report, then claimed by due time, attempted and settled by the delivery loop.

use sqlx::AnyConnection;

use crate::domain::UnixMillis;

/// A delivery as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DeliveryRow {
    pub id: i64,
    pub event: String,
    pub provision_id: Option<i64>,
    /// The exact JSON bytes that are signed and sent.
    pub body: String,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    pub attempts: i64,
    pub next_attempt_at: UnixMillis,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: UnixMillis,
    pub delivered_at: Option<UnixMillis>,
}

const COLUMNS: &str = "id, event, provision_id, body, state, attempts, next_attempt_at, \
    last_status, last_error, created_at, delivered_at";

/// Queues a pending delivery due at once; returns its id.
pub async fn insert(
    conn: &mut AnyConnection,
    event: &str,
    provision_id: Option<i64>,
    body: &str,
    now: UnixMillis,
) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "INSERT INTO webhook_deliveries (event, provision_id, body, state, next_attempt_at,
            created_at)
         VALUES ($1, $2, $3, 'pending', $4, $5) RETURNING id",
    )
    .bind(event)
    .bind(provision_id)
    .bind(body)
    .bind(now)
    .bind(now)
    .fetch_one(conn)
    .await
}

/// Replaces a pending delivery's body (it names its own id, known only after the insert).
pub async fn set_body(conn: &mut AnyConnection, id: i64, body: &str) -> sqlx::Result<()> {
    sqlx::query("UPDATE webhook_deliveries SET body = $1 WHERE id = $2 AND state = 'pending'")
        .bind(body)
        .bind(id)
        .execute(conn)
        .await
        .map(|_| ())
}

/// Pending deliveries due at `now`, oldest due first (`webhook_deliveries_due`).
pub async fn due(
    conn: &mut AnyConnection,
    now: UnixMillis,
    limit: i64,
) -> sqlx::Result<Vec<DeliveryRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM webhook_deliveries
         WHERE state = 'pending' AND next_attempt_at <= $1 ORDER BY next_attempt_at, id LIMIT $2"
    );
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(now)
        .bind(limit)
        .fetch_all(conn)
        .await
}

/// Pushes a pending delivery's due time to `until` if it is still due by `now`: the claim
/// that keeps two delivery loops from sending it at once. `false` when another claimed it.
pub async fn claim(
    conn: &mut AnyConnection,
    id: i64,
    now: UnixMillis,
    until: UnixMillis,
) -> sqlx::Result<bool> {
    let n = sqlx::query(
        "UPDATE webhook_deliveries SET next_attempt_at = $1
         WHERE id = $2 AND state = 'pending' AND next_attempt_at <= $3",
    )
    .bind(until)
    .bind(id)
    .bind(now)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// What one attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle<'a> {
    /// 2xx: done.
    Delivered { status: u16 },
    /// Try again at `next_attempt_at`.
    Retry {
        status: Option<u16>,
        error: &'a str,
        next_attempt_at: UnixMillis,
    },
    /// The last allowed attempt failed.
    Failed { status: Option<u16>, error: &'a str },
}

/// Records an attempt: one more attempt, its status and outcome.
pub async fn settle(
    conn: &mut AnyConnection,
    id: i64,
    now: UnixMillis,
    outcome: Settle<'_>,
) -> sqlx::Result<()> {
    let (state, status, error, next, delivered_at) = match outcome {
        Settle::Delivered { status } => ("delivered", Some(status), None, None, Some(now)),
        Settle::Retry {
            status,
            error,
            next_attempt_at,
        } => ("pending", status, Some(error), Some(next_attempt_at), None),
        Settle::Failed { status, error } => ("failed", status, Some(error), None, None),
    };
    sqlx::query(
        "UPDATE webhook_deliveries SET state = $1, attempts = attempts + 1, last_status = $2,
            last_error = $3, next_attempt_at = COALESCE($4, next_attempt_at),
            delivered_at = COALESCE($5, delivered_at)
         WHERE id = $6",
    )
    .bind(state)
    .bind(status.map(i64::from))
    .bind(error)
    .bind(next)
    .bind(delivered_at)
    .bind(id)
    .execute(conn)
    .await
    .map(|_| ())
}

/// One delivery.
pub async fn get(conn: &mut AnyConnection, id: i64) -> sqlx::Result<Option<DeliveryRow>> {
    let sql = format!("SELECT {COLUMNS} FROM webhook_deliveries WHERE id = $1");
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(conn)
        .await
}

/// A request's deliveries, oldest first.
pub async fn for_provision(
    conn: &mut AnyConnection,
    provision_id: i64,
) -> sqlx::Result<Vec<DeliveryRow>> {
    let sql =
        format!("SELECT {COLUMNS} FROM webhook_deliveries WHERE provision_id = $1 ORDER BY id");
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(provision_id)
        .fetch_all(conn)
        .await
}
