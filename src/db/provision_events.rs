//! A provision's timeline: append-only lines, read in order.

use sqlx::{AnyConnection, Row};

use crate::domain::UnixMillis;

/// A line to append.
#[derive(Debug, Clone)]
pub struct NewEvent<'a> {
    pub provision_id: i64,
    pub at: UnixMillis,
    pub kind: &'a str,
    pub machine: Option<&'a str>,
    pub message: &'a str,
    /// Already free of secrets.
    pub details: &'a serde_json::Value,
}

/// A stored line.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EventRow {
    pub id: i64,
    pub at: UnixMillis,
    pub kind: String,
    pub machine: Option<String>,
    pub message: String,
    pub details: String,
}

/// Appends a line.
pub async fn append(conn: &mut AnyConnection, e: NewEvent<'_>) -> sqlx::Result<i64> {
    let row = sqlx::query(
        "INSERT INTO provision_events (provision_id, at, kind, machine, message, details)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(e.provision_id)
    .bind(e.at)
    .bind(e.kind)
    .bind(e.machine)
    .bind(e.message)
    .bind(e.details.to_string())
    .fetch_one(conn)
    .await?;
    row.try_get("id")
}

/// Every line of a request, oldest first (a request's timeline is short: its states, its
/// approvals and a few provider calls per machine).
pub async fn for_provision(
    conn: &mut AnyConnection,
    provision_id: i64,
) -> sqlx::Result<Vec<EventRow>> {
    sqlx::query_as(
        "SELECT id, at, kind, machine, message, details FROM provision_events
         WHERE provision_id = $1 ORDER BY id",
    )
    .bind(provision_id)
    .fetch_all(conn)
    .await
}
