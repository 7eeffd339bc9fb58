//! The `pin_checks` table: the latest pre-flight verdict per (url, sha256).

use sqlx::AnyConnection;

use crate::domain::UnixMillis;

/// A remembered verdict.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct PinCheckRow {
    pub url: String,
    pub sha256: String,
    pub verdict: String,
    pub message: String,
    pub checked_at: UnixMillis,
    pub checked_by: String,
}

/// Records a verdict, replacing the previous one for the same pair.
pub async fn record(conn: &mut AnyConnection, c: &PinCheckRow) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO pin_checks (url, sha256, verdict, message, checked_at, checked_by) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (url, sha256) DO UPDATE SET verdict = excluded.verdict, message = excluded.message,
             checked_at = excluded.checked_at, checked_by = excluded.checked_by",
    )
    .bind(&c.url)
    .bind(&c.sha256)
    .bind(&c.verdict)
    .bind(&c.message)
    .bind(c.checked_at)
    .bind(&c.checked_by)
    .execute(conn)
    .await
    .map(|_| ())
}

/// The verdict for a pair, if one was recorded.
pub async fn get(
    conn: &mut AnyConnection,
    url: &str,
    sha256: &str,
) -> sqlx::Result<Option<PinCheckRow>> {
    sqlx::query_as("SELECT * FROM pin_checks WHERE url = $1 AND sha256 = $2")
        .bind(url)
        .bind(sha256)
        .fetch_optional(conn)
        .await
}
