//! The `sessions` table. Rows hold the sha256 of the cookie token, never the token.

use sqlx::AnyConnection;

use crate::domain::UnixMillis;

/// A live session joined with its user.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SessionRow {
    pub id: i64,
    pub user_id: i64,
    pub created_at: UnixMillis,
    pub last_seen_at: UnixMillis,
    pub username: String,
    pub role: String,
    #[sqlx(try_from = "super::flag::Flag")]
    pub disabled: bool,
    #[sqlx(try_from = "super::flag::Flag")]
    pub has_flash: bool,
}

/// Stores a new session.
pub async fn insert(
    conn: &mut AnyConnection,
    token_hash: &str,
    user_id: i64,
    now: UnixMillis,
) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "INSERT INTO sessions (token_hash, user_id, created_at, last_seen_at)
         VALUES ($1, $2, $3, $3) RETURNING id",
    )
    .bind(token_hash)
    .bind(user_id)
    .bind(now)
    .fetch_one(conn)
    .await
}

/// Finds the session for a token hash.
pub async fn by_token_hash(
    conn: &mut AnyConnection,
    token_hash: &str,
) -> sqlx::Result<Option<SessionRow>> {
    sqlx::query_as(
        "SELECT s.id, s.user_id, s.created_at, s.last_seen_at, u.username, u.role, u.disabled,
                s.flash IS NOT NULL AS has_flash
         FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE s.token_hash = $1",
    )
    .bind(token_hash)
    .fetch_optional(conn)
    .await
}

/// Records activity at once (only when activity memory is full; see `auth::sessions`).
pub async fn touch(conn: &mut AnyConnection, id: i64, now: UnixMillis) -> sqlx::Result<()> {
    sqlx::query("UPDATE sessions SET last_seen_at = $2 WHERE id = $1")
        .bind(id)
        .bind(now)
        .execute(conn)
        .await
        .map(|_| ())
}

/// Raises a session's last activity to `at` (never lowers it); false when the session (this
/// id created at `created_at`) no longer exists.
pub async fn record_activity(
    conn: &mut AnyConnection,
    id: i64,
    created_at: UnixMillis,
    at: UnixMillis,
) -> sqlx::Result<bool> {
    sqlx::query(
        "UPDATE sessions SET last_seen_at = CASE WHEN $3 > last_seen_at THEN $3 ELSE last_seen_at END WHERE id = $1 AND created_at = $2",
    )
    .bind(id)
    .bind(created_at)
    .bind(at)
    .execute(conn)
    .await
    .map(|r| r.rows_affected() > 0)
}

/// Ends one session.
pub async fn delete(conn: &mut AnyConnection, id: i64) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM sessions WHERE id = $1")
        .bind(id)
        .execute(conn)
        .await
        .map(|_| ())
}

/// Ends every session of a user except `keep`.
pub async fn delete_for_user(
    conn: &mut AnyConnection,
    user_id: i64,
    keep: Option<i64>,
) -> sqlx::Result<u64> {
    sqlx::query("DELETE FROM sessions WHERE user_id = $1 AND id IS DISTINCT FROM $2")
        .bind(user_id)
        .bind(keep)
        .execute(conn)
        .await
        .map(|r| r.rows_affected())
}

/// Removes sessions past either expiry.
pub async fn delete_expired(
    conn: &mut AnyConnection,
    idle_cutoff: UnixMillis,
    absolute_cutoff: UnixMillis,
) -> sqlx::Result<u64> {
    sqlx::query("DELETE FROM sessions WHERE last_seen_at < $1 OR created_at < $2")
        .bind(idle_cutoff)
        .bind(absolute_cutoff)
        .execute(conn)
        .await
        .map(|r| r.rows_affected())
}

/// Stores a one-shot message for the session's next page.
pub async fn set_flash(conn: &mut AnyConnection, id: i64, flash: &str) -> sqlx::Result<()> {
    sqlx::query("UPDATE sessions SET flash = $2 WHERE id = $1")
        .bind(id)
        .bind(flash)
        .execute(conn)
        .await
        .map(|_| ())
}

/// Reads and clears the session's flash message.
pub async fn take_flash(conn: &mut AnyConnection, id: i64) -> sqlx::Result<Option<String>> {
    // Two statements: SQLite's RETURNING yields the row after the update (NULL by then).
    let flash: Option<Option<String>> =
        sqlx::query_scalar("SELECT flash FROM sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
    let flash = flash.flatten();
    if flash.is_some() {
        sqlx::query("UPDATE sessions SET flash = NULL WHERE id = $1")
            .bind(id)
            .execute(conn)
            .await?;
    }
    Ok(flash)
}
