//! The `login_throttle` table: failed-login counters per account and per client address.

use sqlx::SqliteConnection;

use crate::domain::UnixMillis;

/// A key's failure record.
#[derive(Debug, Clone, Copy, sqlx::FromRow)]
pub struct ThrottleRow {
    pub failures: i64,
    pub last_failure_at: UnixMillis,
    pub locked_until: UnixMillis,
}

/// The record for `key`, if any.
pub async fn get(conn: &mut SqliteConnection, key: &str) -> sqlx::Result<Option<ThrottleRow>> {
    sqlx::query_as(
        "SELECT failures, last_failure_at, locked_until FROM login_throttle WHERE key = ?1",
    )
    .bind(key)
    .fetch_optional(conn)
    .await
}

/// Writes the record for `key`.
pub async fn put(conn: &mut SqliteConnection, key: &str, row: ThrottleRow) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO login_throttle (key, failures, last_failure_at, locked_until)
         VALUES (?1, ?2, ?3, ?4)
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

/// Forgets `key` (after a successful login).
pub async fn clear(conn: &mut SqliteConnection, key: &str) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM login_throttle WHERE key = ?1")
        .bind(key)
        .execute(conn)
        .await
        .map(|_| ())
}
