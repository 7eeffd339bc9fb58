//! Versioned documents: machine configs (`spec` JSON) and templates (`body` text) share one
//! shape — a named head row plus immutable numbered versions — so they share these queries.

use sqlx::query::QueryAs;
use sqlx::{Any, AnyConnection};

use crate::domain::UnixMillis;

/// Which versioned family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    MachineConfig,
    Template,
}

impl Family {
    // Static SQL per family: table and column names are never user input.
    fn sql(self) -> FamilySql {
        match self {
            Family::MachineConfig => FamilySql {
                head: "machine_configs",
                versions: "machine_config_versions",
                fk: "config_id",
                content: "spec",
            },
            Family::Template => FamilySql {
                head: "templates",
                versions: "template_versions",
                fk: "template_id",
                content: "body",
            },
        }
    }
}

struct FamilySql {
    head: &'static str,
    versions: &'static str,
    fk: &'static str,
    content: &'static str,
}

/// One version of a document.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct Version {
    pub name: String,
    pub version: i64,
    pub content: String,
    pub author: String,
    pub created_at: UnixMillis,
}

/// A version about to be written: which document, what it says, who wrote it and when.
#[derive(Debug, Clone, Copy)]
pub struct NewVersion<'a> {
    /// Machine configs or templates.
    pub family: Family,
    /// The document's name.
    pub name: &'a str,
    /// The version's whole text.
    pub content: &'a str,
    /// Who wrote it (a username, or `system`).
    pub author: &'a str,
    /// When it was written.
    pub now: UnixMillis,
}

/// Creates a document with version 1; `Ok(false)` when the name is taken.
pub async fn create(conn: &mut AnyConnection, new: &NewVersion<'_>) -> sqlx::Result<bool> {
    let f = new.family.sql();
    let id: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {} (name, created_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING id",
        f.head
    )))
    .bind(new.name)
    .bind(new.now)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(id) = id else { return Ok(false) };
    insert_version(conn, f, id, 1, new).await?;
    Ok(true)
}

async fn insert_version(
    conn: &mut AnyConnection,
    f: FamilySql,
    id: i64,
    version: i64,
    new: &NewVersion<'_>,
) -> sqlx::Result<()> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {} ({}, version, {}, author, created_at) VALUES ($1, $2, $3, $4, $5)",
        f.versions, f.fk, f.content
    )))
    .bind(id)
    .bind(version)
    .bind(new.content)
    .bind(new.author)
    .bind(new.now)
    .execute(conn)
    .await
    .map(|_| ())
}

/// Appends a version; returns its number, or `None` when the document does not exist.
pub async fn append(conn: &mut AnyConnection, new: &NewVersion<'_>) -> sqlx::Result<Option<i64>> {
    let f = new.family.sql();
    let head: Option<(i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT h.id, COALESCE(MAX(v.version), 0) FROM {} h LEFT JOIN {} v ON v.{} = h.id WHERE h.name = $1 GROUP BY h.id",
        f.head, f.versions, f.fk
    )))
    .bind(new.name)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((id, last)) = head else {
        return Ok(None);
    };
    insert_version(conn, f, id, last + 1, new).await?;
    Ok(Some(last + 1))
}

/// The versions of `family` joined with their document, as [`Version`] reads them, then
/// `tail` (the `WHERE`/`ORDER BY` of one read; `h` is the head table, `v` the versions').
fn versions_query(family: Family, tail: &str) -> sqlx::AssertSqlSafe<String> {
    let f = family.sql();
    sqlx::AssertSqlSafe(format!(
        "SELECT h.name AS name, v.version AS version, v.{} AS content, v.author AS author, v.created_at AS created_at FROM {} v JOIN {} h ON h.id = v.{} {tail}",
        f.content, f.versions, f.head, f.fk
    ))
}

/// The versions of document `name` (bound as `$1`), then `rest` of the statement.
fn versions_of<'q>(
    family: Family,
    name: &'q str,
    rest: &str,
) -> QueryAs<'q, Any, Version, <Any as sqlx::Database>::Arguments> {
    sqlx::query_as(versions_query(family, &format!("WHERE h.name = $1 {rest}"))).bind(name)
}

/// The latest version of every document, by name.
pub async fn latest_all(conn: &mut AnyConnection, family: Family) -> sqlx::Result<Vec<Version>> {
    let f = family.sql();
    let tail = format!(
        "WHERE v.version = (SELECT MAX(version) FROM {} WHERE {} = h.id) ORDER BY h.name",
        f.versions, f.fk
    );
    sqlx::query_as(versions_query(family, &tail))
        .fetch_all(conn)
        .await
}

/// Which version of a document to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// The newest version.
    Latest,
    /// Version number `n` (from 1).
    Exact(i64),
}

/// One version of one document: the latest, or an exact one.
pub async fn one(
    conn: &mut AnyConnection,
    family: Family,
    name: &str,
    pick: Pick,
) -> sqlx::Result<Option<Version>> {
    let query = match pick {
        Pick::Latest => versions_of(family, name, "ORDER BY v.version DESC LIMIT 1"),
        Pick::Exact(version) => versions_of(family, name, "AND v.version = $2").bind(version),
    };
    query.fetch_optional(conn).await
}

/// Every version of one document, newest first.
pub async fn history(
    conn: &mut AnyConnection,
    family: Family,
    name: &str,
) -> sqlx::Result<Vec<Version>> {
    versions_of(family, name, "ORDER BY v.version DESC")
        .fetch_all(conn)
        .await
}

/// Every document name.
pub async fn names(conn: &mut AnyConnection, family: Family) -> sqlx::Result<Vec<String>> {
    let f = family.sql();
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT name FROM {} ORDER BY name",
        f.head
    )))
    .fetch_all(conn)
    .await
}
