//! The `login_throttle` table: counted password attempts per key (an account, a client
//! address, an account's password-change form). The `failures` column counts attempts that
//! were counted before their password was checked and not taken back since.

use sqlx::AnyConnection;

use crate::domain::UnixMillis;

/// A key's attempt record.
#[derive(Debug, Clone, Copy, sqlx::FromRow)]
pub struct ThrottleRow {
    /// Attempts counted in the current window.
    pub failures: i64,
    /// When the last one was counted.
    pub last_failure_at: UnixMillis,
    /// Until when the key is locked (0 or a past time: not locked).
    pub locked_until: UnixMillis,
}

/// The record for `key`, if any.
pub async fn get(conn: &mut AnyConnection, key: &str) -> sqlx::Result<Option<ThrottleRow>> {
    sqlx::query_as(
        "SELECT failures, last_failure_at, locked_until FROM login_throttle WHERE key = $1",
    )
    .bind(key)
    .fetch_optional(conn)
    .await
}

/// Writes the record for `key`.
pub async fn put(conn: &mut AnyConnection, key: &str, row: ThrottleRow) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO login_throttle (key, failures, last_failure_at, locked_until)
         VALUES ($1, $2, $3, $4)
         ON CONFLICT (key) DO UPDATE SET failures = excluded.failures,
             last_failure_at = excluded.last_failure_at, locked_until = excluded.locked_until",
    )
    .bind(key)
    .bind(row.failures)
    .bind(row.last_failure_at)
    .bind(row.locked_until)
    .execute(conn)
    .await
    .map(|_| ())
}

/// Un-counts one attempt of `key`. When fewer than `threshold` remain, the lock goes too: it
/// was engaged by attempts that no longer count. A record left at zero is deleted.
pub async fn take_back(conn: &mut AnyConnection, key: &str, threshold: u32) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE login_throttle SET failures = failures - 1,
             locked_until = CASE WHEN failures - 1 < $2 THEN 0 ELSE locked_until END
         WHERE key = $1",
    )
    .bind(key)
    .bind(i64::from(threshold))
    .execute(&mut *conn)
    .await?;
    sqlx::query("DELETE FROM login_throttle WHERE key = $1 AND failures <= 0")
        .bind(key)
        .execute(conn)
        .await
        .map(|_| ())
}

/// Forgets `key` (after a successful login or password change).
pub async fn clear(conn: &mut AnyConnection, key: &str) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM login_throttle WHERE key = $1")
        .bind(key)
        .execute(conn)
        .await
        .map(|_| ())
}
