//! The `fleet_changes` table (every create, update and delete of a fleet, by name, with the
//! fields changed) and `provision_causes` (who last changed each setting a request was
//! computed from, as of its filing).

use sqlx::AnyConnection;

use crate::domain::UnixMillis;

/// One change to a fleet; `changes` is JSON text (field → before/after).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FleetChangeRow {
    pub id: i64,
    pub at: UnixMillis,
    pub actor: String,
    pub kind: String,
    pub changes: String,
}

/// Appends one change of fleet `fleet`.
pub async fn insert(
    conn: &mut AnyConnection,
    fleet: &str,
    at: UnixMillis,
    actor: &str,
    kind: &str,
    changes: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO fleet_changes (fleet, at, actor, kind, changes) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(fleet)
    .bind(at)
    .bind(actor)
    .bind(kind)
    .bind(changes)
    .execute(conn)
    .await?;
    Ok(())
}

/// The newest `limit` changes of fleet `fleet`, newest first.
pub async fn for_fleet(
    conn: &mut AnyConnection,
    fleet: &str,
    limit: i64,
) -> sqlx::Result<Vec<FleetChangeRow>> {
    sqlx::query_as(
        "SELECT id, at, actor, kind, changes FROM fleet_changes WHERE fleet = $1
         ORDER BY id DESC LIMIT $2",
    )
    .bind(fleet)
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// Who last changed `field` of fleet `fleet`, and when (a create sets every field; a delete
/// clears them, and a create after it sets them again). `None` when no change names it.
pub async fn last_changer(
    conn: &mut AnyConnection,
    fleet: &str,
    field: &str,
) -> sqlx::Result<Option<(String, UnixMillis)>> {
    // `field` is one of our own field names; bound, and quoted as a JSON path key.
    let sql = super::Dialect::of(conn).pick(
        "SELECT actor, at FROM fleet_changes
             WHERE fleet = $1 AND json_type(changes, '$.\"' || $2 || '\"') IS NOT NULL
             ORDER BY id DESC LIMIT 1",
        "SELECT actor, at FROM fleet_changes
             WHERE fleet = $1 AND (changes::jsonb -> $2) IS NOT NULL
             ORDER BY id DESC LIMIT 1",
    );
    sqlx::query_as(sql)
        .bind(fleet)
        .bind(field)
        .fetch_optional(conn)
        .await
}

/// Records who last changed `field` of the fleet request `provision_id` was computed from.
pub async fn insert_cause(
    conn: &mut AnyConnection,
    provision_id: i64,
    field: &str,
    changed_by: &str,
    changed_at: UnixMillis,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO provision_causes (provision_id, field, changed_by, changed_at)
         VALUES ($1, $2, $3, $4)",
    )
    .bind(provision_id)
    .bind(field)
    .bind(changed_by)
    .bind(changed_at)
    .execute(conn)
    .await?;
    Ok(())
}

/// The fields of request `provision_id` that `who` last changed before it was filed, by name.
pub async fn caused_by(
    conn: &mut AnyConnection,
    provision_id: i64,
    who: &str,
) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT field FROM provision_causes WHERE provision_id = $1 AND changed_by = $2
         ORDER BY field",
    )
    .bind(provision_id)
    .bind(who)
    .fetch_all(conn)
    .await
}
