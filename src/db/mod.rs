//! Storage: pool set-up and one module per table family. Portable SQL where it costs nothing,
//! so the PostgreSQL store (`postgres`: its schema and migrations so far) can serve the same
//! functions. Which store a URL names is `domain::database_url::Store::of`.

pub mod audit;
pub mod backup;
pub mod catalogue;
pub mod fleet_changes;
pub mod fleet_deficits;
pub mod fleet_samples;
pub mod fleet_status;
pub mod fleets;
pub mod instance_keys;
pub mod pins;
pub mod postgres;
pub mod provision_events;
pub mod provision_jobs;
pub mod provisions;
pub mod sessions;
pub mod throttle;
pub mod tokens;
pub mod users;
pub mod versions;
pub mod webhooks;

use std::io::Read;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{SqliteConnection, SqlitePool};

/// Embedded migrations, applied on every start.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Opens (creating if needed) the database with WAL, a busy timeout and foreign keys, then
/// applies migrations.
#[tracing::instrument(skip_all, fields(db.url = %url), err)]
pub async fn connect(url: &str) -> anyhow::Result<SqlitePool> {
    let pool = pool(options(url)?.create_if_missing(true)).await?;
    MIGRATOR.run(&pool).await?;
    Ok(pool)
}

/// Opens a database that must exist already, as it is: nothing created, nothing migrated, its
/// journal mode left alone (a backup copies the file as the serving binary left it, even
/// before an upgrade, and a restored copy stays as it was restored).
#[tracing::instrument(skip_all, fields(db.url = %url), err)]
pub async fn open_existing(url: &str) -> anyhow::Result<SqlitePool> {
    let options = SqliteConnectOptions::from_str(url)?;
    let file = options.get_filename().to_path_buf();
    let mut header = [0_u8; 16];
    match std::fs::File::open(&file).and_then(|mut f| f.read_exact(&mut header)) {
        Ok(()) if &header == b"SQLite format 3\0" => {}
        Ok(()) => anyhow::bail!("{} is not a SQLite database", file.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!("there is no database at {} (it must exist)", file.display())
        }
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            anyhow::bail!("{} is not a SQLite database (too short)", file.display())
        }
        Err(e) => anyhow::bail!("cannot read {}: {e}", file.display()),
    }
    let options = common(options).create_if_missing(false);
    Ok(pool(options).await?)
}

/// The options of every connection `serve` and the commands open: WAL and the rest.
fn options(url: &str) -> anyhow::Result<SqliteConnectOptions> {
    Ok(common(SqliteConnectOptions::from_str(url)?)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal))
}

/// What every connection sets, whatever its journal mode.
fn common(options: SqliteConnectOptions) -> SqliteConnectOptions {
    options
        .busy_timeout(Duration::from_secs(5))
        .foreign_keys(true)
        // sqlx hands each row from its connection thread to the caller through a channel; at
        // the default 50 a 360-row read stalled the thread seven times, each a futex wake-up.
        // Charts now read one packed row (`fleet_samples`), but listings and exports still
        // read hundreds of rows a page, a few hundred bytes each.
        .row_buffer_size(512)
}

async fn pool(options: SqliteConnectOptions) -> sqlx::Result<SqlitePool> {
    SqlitePoolOptions::new()
        // A SQLite connection is a file handle in this process: no network or server restart
        // can break it behind our back, so the default ping before every acquire would only
        // double each query's round trips through sqlx's per-connection thread (measured: the
        // dashboard's throughput is bound by exactly those round trips).
        .test_before_acquire(false)
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
}

/// The newest migration this binary carries.
pub fn latest_migration() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Starts a write transaction that takes the write lock up front, so two writers never
/// deadlock upgrading from a read lock (SQLite's SQLITE_BUSY on upgrade).
pub async fn begin_write(
    pool: &SqlitePool,
) -> sqlx::Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
    pool.begin_with("BEGIN IMMEDIATE").await
}

/// Whether the database answers.
pub async fn ping(conn: &mut SqliteConnection) -> sqlx::Result<()> {
    sqlx::query("SELECT 1").execute(conn).await.map(|_| ())
}
