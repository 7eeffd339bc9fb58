//! The PostgreSQL store: its own migrations (`migrations/postgres`, the same schema in
//! PostgreSQL's dialect, each version numbered as its SQLite twin), applied at start and by
//! `headroom migrate`; every query of `db` then runs on it through sqlx's `Any` driver.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::Connection;

/// PostgreSQL's embedded migrations.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// How long to wait for the server to answer at all.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one statement may wait for a lock (another migrator's, a session holding a
/// table) before the migration gives up instead of hanging.
const LOCK_TIMEOUT: &str = "60s";

/// Applies the migrations the database at `url` lacks, over one connection. Several
/// instances may migrate at once: sqlx serialises them with an advisory lock.
#[tracing::instrument(skip_all, err)]
pub async fn migrate(url: &str) -> anyhow::Result<()> {
    let options = options(url)?;
    let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options))
        .await
        .map_err(|_| anyhow::anyhow!("PostgreSQL did not answer within {CONNECT_TIMEOUT:?}"))??;
    MIGRATOR.run(&mut conn).await?;
    conn.close().await?;
    Ok(())
}

/// What every pooled connection sets: its name in `pg_stat_activity`, and how long a
/// statement waits for a lock (writers queue on one advisory lock, `db::begin_write`).
pub const PER_CONNECTION: &str = "SET application_name = 'headroom'; SET lock_timeout = '60s';";

/// The connection options `url` gives, read with logging off: sqlx warns about a malformed
/// passfile line by logging the whole line, password included.
fn options(url: &str) -> anyhow::Result<PgConnectOptions> {
    let options =
        tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
            PgConnectOptions::from_str(url)
        })?;
    Ok(options
        .application_name("headroom")
        .options([("lock_timeout", LOCK_TIMEOUT)]))
}

/// The newest migration this binary carries for PostgreSQL (equal to SQLite's: tests check).
pub fn latest_migration() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}
