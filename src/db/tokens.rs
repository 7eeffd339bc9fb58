//! The `api_tokens` table. Rows hold the sha256 of the bearer token, never the token.

use sqlx::AnyConnection;

use crate::domain::UnixMillis;

/// A token as listed (never its secret).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TokenRow {
    pub id: i64,
    pub user_id: i64,
    pub username: String,
    pub label: String,
    pub created_at: UnixMillis,
    pub created_by: String,
    pub last_used_at: Option<UnixMillis>,
    pub revoked_at: Option<UnixMillis>,
}

/// The user a live token acts as.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TokenOwner {
    pub token_id: i64,
    pub user_id: i64,
    pub username: String,
    pub role: String,
    pub last_used_at: Option<UnixMillis>,
}

/// Stores a token.
pub async fn insert(
    conn: &mut AnyConnection,
    user_id: i64,
    label: &str,
    token_hash: &str,
    created_by: &str,
    now: UnixMillis,
) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "INSERT INTO api_tokens (user_id, label, token_hash, created_at, created_by)
         VALUES ($1, $2, $3, $4, $5) RETURNING id",
    )
    .bind(user_id)
    .bind(label)
    .bind(token_hash)
    .bind(now)
    .bind(created_by)
    .fetch_one(conn)
    .await
}

/// The owner of an unrevoked token whose user is enabled.
pub async fn live_owner(
    conn: &mut AnyConnection,
    token_hash: &str,
) -> sqlx::Result<Option<TokenOwner>> {
    sqlx::query_as(
        "SELECT t.id AS token_id, u.id AS user_id, u.username, u.role, t.last_used_at
         FROM api_tokens t JOIN users u ON u.id = t.user_id
         WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND NOT u.disabled",
    )
    .bind(token_hash)
    .fetch_optional(conn)
    .await
}

/// Records use (callers throttle this to about once a minute).
pub async fn touch(conn: &mut AnyConnection, id: i64, now: UnixMillis) -> sqlx::Result<()> {
    sqlx::query("UPDATE api_tokens SET last_used_at = $2 WHERE id = $1")
        .bind(id)
        .bind(now)
        .execute(conn)
        .await
        .map(|_| ())
}

/// Every token, newest first.
pub async fn list(conn: &mut AnyConnection) -> sqlx::Result<Vec<TokenRow>> {
    sqlx::query_as(
        "SELECT t.id, t.user_id, u.username, t.label, t.created_at, t.created_by,
                t.last_used_at, t.revoked_at
         FROM api_tokens t JOIN users u ON u.id = t.user_id
         ORDER BY t.id DESC",
    )
    .fetch_all(conn)
    .await
}

/// One token.
pub async fn by_id(conn: &mut AnyConnection, id: i64) -> sqlx::Result<Option<TokenRow>> {
    sqlx::query_as(
        "SELECT t.id, t.user_id, u.username, t.label, t.created_at, t.created_by,
                t.last_used_at, t.revoked_at
         FROM api_tokens t JOIN users u ON u.id = t.user_id
         WHERE t.id = $1",
    )
    .bind(id)
    .fetch_optional(conn)
    .await
}

/// Revokes a token; false when it was already revoked.
pub async fn revoke(conn: &mut AnyConnection, id: i64, now: UnixMillis) -> sqlx::Result<bool> {
    sqlx::query("UPDATE api_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL")
        .bind(id)
        .bind(now)
        .execute(conn)
        .await
        .map(|r| r.rows_affected() == 1)
}
