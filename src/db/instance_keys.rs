//! The `instance_keys` table: one random secret per purpose, created on first start.

use sqlx::AnyConnection;

use crate::domain::UnixMillis;

/// The key stored for `purpose`, storing `fresh` first when there is none yet. Concurrent
/// first starts agree: the first insert wins and every caller reads the row back.
pub async fn get_or_insert(
    conn: &mut AnyConnection,
    purpose: &str,
    fresh: &[u8],
    now: UnixMillis,
) -> sqlx::Result<Vec<u8>> {
    sqlx::query(
        "INSERT INTO instance_keys (purpose, key, created_at) VALUES ($1, $2, $3)
         ON CONFLICT (purpose) DO NOTHING",
    )
    .bind(purpose)
    .bind(fresh)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    sqlx::query_scalar("SELECT key FROM instance_keys WHERE purpose = $1")
        .bind(purpose)
        .fetch_one(conn)
        .await
}

/// The key stored for `purpose`, if there is one (a read only).
pub async fn get(conn: &mut AnyConnection, purpose: &str) -> sqlx::Result<Option<Vec<u8>>> {
    sqlx::query_scalar("SELECT key FROM instance_keys WHERE purpose = $1")
        .bind(purpose)
        .fetch_optional(conn)
        .await
}
