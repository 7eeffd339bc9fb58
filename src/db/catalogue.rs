//! The `catalogue` table: what each provider offers, cached.

use sqlx::AnyConnection;

use crate::domain::UnixMillis;

/// One cached offering; `details` is the provider-neutral JSON of `provider::catalogue`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CatalogueRow {
    pub kind: String,
    pub name: String,
    pub details: String,
    pub refreshed_at: UnixMillis,
}

/// Replaces a provider's cached catalogue.
pub async fn replace(
    conn: &mut AnyConnection,
    provider: &str,
    rows: &[(&str, String, String)],
    now: UnixMillis,
) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM catalogue WHERE provider = $1")
        .bind(provider)
        .execute(&mut *conn)
        .await?;
    for (kind, name, details) in rows {
        sqlx::query("INSERT INTO catalogue (provider, kind, name, details, refreshed_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(provider)
            .bind(kind)
            .bind(name)
            .bind(details)
            .bind(now)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// A provider's cached catalogue, by kind then name.
pub async fn for_provider(
    conn: &mut AnyConnection,
    provider: &str,
) -> sqlx::Result<Vec<CatalogueRow>> {
    sqlx::query_as("SELECT kind, name, details, refreshed_at FROM catalogue WHERE provider = $1 ORDER BY kind, name")
        .bind(provider)
        .fetch_all(conn)
        .await
}
