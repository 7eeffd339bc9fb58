//! An online copy of the SQLite database (`headroom backup`), and the checks run on it.

use std::path::{Path, PathBuf};

use sqlx::{AnyConnection, Connection};

/// Writes a consistent copy of the whole database into `dest` (a path SQLite opens), which
/// must be missing or an empty file. `VACUUM INTO` reads inside one read transaction, so the
/// copy is the database at one moment and the server's writers go on; only the WAL cannot be
/// checkpointed past that moment until the copy is done, so it grows meanwhile.
pub async fn vacuum_into(conn: &mut sqlx::AnyConnection, dest: &str) -> sqlx::Result<()> {
    sqlx::query("VACUUM INTO $1")
        .bind(dest)
        .execute(conn)
        .await?;
    Ok(())
}

/// Opens a copy read-only, so checking it can neither migrate nor change it.
pub async fn open_copy(path: &Path) -> anyhow::Result<AnyConnection> {
    super::install_drivers();
    Ok(AnyConnection::connect(&super::sqlite_file_url(path, "ro")?).await?)
}

/// What SQLite finds wrong in a copy: its integrity check of every table and index, then
/// rows whose foreign key points at nothing. Empty when the copy is sound.
pub async fn problems(conn: &mut AnyConnection) -> sqlx::Result<Vec<String>> {
    let mut out: Vec<String> = sqlx::query_scalar::<_, String>("PRAGMA integrity_check(100)")
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .filter(|l| l != "ok")
        .collect();
    let dangling: Vec<(String, Option<i64>, String)> =
        sqlx::query_as("SELECT \"table\", rowid, parent FROM pragma_foreign_key_check LIMIT 100")
            .fetch_all(conn)
            .await?;
    out.extend(
        dangling
            .into_iter()
            .map(|(table, rowid, parent)| match rowid {
                Some(id) => format!("{table} row {id} refers to a missing {parent} row"),
                None => format!("a {table} row refers to a missing {parent} row"),
            }),
    );
    Ok(out)
}

/// The number of the newest migration applied to the database behind `conn`.
pub async fn schema_version(conn: &mut AnyConnection) -> sqlx::Result<i64> {
    sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success")
        .fetch_one(conn)
        .await
}

/// Deletes a copy that will not be kept, with the rollback journal SQLite may have left beside
/// it while writing.
pub fn remove_copy(path: &Path) {
    let mut journal = path.as_os_str().to_owned();
    journal.push("-journal");
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(PathBuf::from(journal));
}
