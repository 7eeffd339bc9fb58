//! The `fleets` table: one row per fleet, its spec stored whole as JSON (secret sources only,
//! never values), plus the restore config column so requests can be found by it.

use sqlx::{AnyConnection, Row};

use crate::domain::UnixMillis;

/// A stored fleet, its spec still JSON text.
#[derive(Debug, Clone)]
pub struct FleetRow {
    pub name: String,
    pub spec: String,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
    pub updated_by: String,
}

/// The columns a write sets.
#[derive(Debug, Clone, Copy)]
pub struct FleetWrite<'a> {
    pub name: &'a str,
    pub spec: &'a str,
    pub restore_machine_config: &'a str,
    pub at: UnixMillis,
    pub by: &'a str,
}

fn from_row(r: &sqlx::any::AnyRow) -> sqlx::Result<FleetRow> {
    Ok(FleetRow {
        name: r.try_get("name")?,
        spec: r.try_get("spec")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
        updated_by: r.try_get("updated_by")?,
    })
}

/// Inserts a fleet; `false` when the name is taken.
pub async fn insert(conn: &mut AnyConnection, w: FleetWrite<'_>) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "INSERT INTO fleets (name, spec, restore_machine_config, created_at, updated_at, updated_by)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING",
    )
    .bind(w.name)
    .bind(w.spec)
    .bind(w.restore_machine_config)
    .bind(w.at)
    .bind(w.at)
    .bind(w.by)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Replaces a fleet's spec; `false` when no fleet has that name.
pub async fn update(conn: &mut AnyConnection, w: FleetWrite<'_>) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "UPDATE fleets SET spec = $1, restore_machine_config = $2, updated_at = $3, updated_by = $4
         WHERE name = $5",
    )
    .bind(w.spec)
    .bind(w.restore_machine_config)
    .bind(w.at)
    .bind(w.by)
    .bind(w.name)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Deletes a fleet; `false` when there was none.
pub async fn delete(conn: &mut AnyConnection, name: &str) -> sqlx::Result<bool> {
    let done = sqlx::query("DELETE FROM fleets WHERE name = $1")
        .bind(name)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// One fleet by name.
pub async fn get(conn: &mut AnyConnection, name: &str) -> sqlx::Result<Option<FleetRow>> {
    sqlx::query("SELECT name, spec, created_at, updated_at, updated_by FROM fleets WHERE name = $1")
        .bind(name)
        .fetch_optional(conn)
        .await?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// Every fleet, by name (a console watches a handful of fleets, not thousands).
pub async fn list(conn: &mut AnyConnection) -> sqlx::Result<Vec<FleetRow>> {
    sqlx::query("SELECT name, spec, created_at, updated_at, updated_by FROM fleets ORDER BY name")
        .fetch_all(conn)
        .await?
        .iter()
        .map(from_row)
        .collect()
}

/// How many of the fleet's requests are still open: awaiting approval, approved, or running.
pub async fn open_provisions(conn: &mut AnyConnection, fleet: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM provisions
         WHERE fleet = $1 AND state IN ('pending_approval', 'approved', 'executing')",
    )
    .bind(fleet)
    .fetch_one(conn)
    .await
}
