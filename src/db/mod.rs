//! Storage: pool set-up and one module per table family. Portable SQL where it costs nothing,
//! so the PostgreSQL store (`postgres`: its schema and migrations) serves the same functions. Which store a URL names is `domain::database_url::Store::of`.

pub mod audit;
pub mod backup;
pub mod catalogue;
pub mod dialect;
pub mod flag;
pub mod fleet_changes;
pub mod fleet_deficits;
pub mod fleet_samples;
pub mod fleet_status;
pub mod fleets;
pub mod instance_keys;
pub mod leases;
pub mod pins;
pub mod postgres;
pub mod provision_events;
pub mod provision_jobs;
pub mod provisions;
pub mod sessions;
pub mod sql;
pub mod throttle;
pub mod tokens;
pub mod users;
pub mod versions;
pub mod webhooks;

use std::io::Read;
use std::str::FromStr;
use std::sync::Once;
use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{AnyConnection, AnyPool, ConnectOptions, Connection, Executor};

pub use dialect::Dialect;

/// Embedded migrations, applied on every start.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Opens (creating if needed) the database with WAL, a busy timeout and foreign keys, then
/// applies migrations. A `postgres://` URL migrates PostgreSQL's schema (`postgres::migrate`) and opens a pool on it.
#[tracing::instrument(skip_all, fields(db.url = %url), err)]
pub async fn connect(url: &str) -> anyhow::Result<AnyPool> {
    let store = crate::domain::database_url::Store::of(url)
        .map_err(|e| anyhow::anyhow!("database_url: {e}"))?;
    if store == crate::domain::database_url::Store::Postgres {
        postgres::migrate(url).await?;
        return Ok(pool(url, postgres::PER_CONNECTION).await?);
    }
    // Creating the file, switching it to WAL (which the file keeps) and migrating take one
    // native connection; the pool's connections then only set what is per connection. They
    // open the very file the setup did, named by its canonical path: `url` is parsed once.
    let options = options(url)?;
    let mut setup = options.clone().create_if_missing(true).connect().await?;
    MIGRATOR.run(&mut setup).await?;
    setup.close().await?;
    let file = sqlite_file_url(options.get_filename(), "rw")?;
    Ok(pool(&file, PER_CONNECTION_WAL).await?)
}

/// A `sqlite://` URL naming `path` exactly, for sqlx's `Any` driver, which takes only URLs:
/// the path made canonical (so `..` and links mean what they meant to the file system), then
/// every byte but `A-Z a-z 0-9 / . _ - ~` percent-encoded (`%` included, which sqlx's own URL
/// form leaves bare). An in-memory database is refused: each pooled connection would get an
/// empty one of its own.
pub fn sqlite_file_url(path: &std::path::Path, mode: &str) -> anyhow::Result<String> {
    if path.as_os_str() == ":memory:" || path.as_os_str().is_empty() {
        anyhow::bail!(
            "database_url: an in-memory SQLite database lasts only as long as one connection; \
             name a file (sqlite:headroom.db)"
        );
    }
    let path = std::fs::canonicalize(path)
        .map_err(|e| anyhow::anyhow!("database file {}: {e}", path.display()))?;
    let Some(text) = path.to_str() else {
        anyhow::bail!("database file {}: the path is not UTF-8", path.display());
    };
    let mut url = String::from("sqlite://");
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"/._-~".contains(&b) {
            url.push(char::from(b));
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url.push_str("?mode=");
    url.push_str(mode);
    Ok(url)
}

/// Opens a database that must exist already, as it is: nothing created, nothing migrated, its
/// journal mode left alone (a backup copies the file as the serving binary left it, even
/// before an upgrade, and a restored copy stays as it was restored).
#[tracing::instrument(skip_all, fields(db.url = %url), err)]
pub async fn open_existing(url: &str) -> anyhow::Result<AnyPool> {
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
    Ok(pool(&sqlite_file_url(&file, "rw")?, PER_CONNECTION).await?)
}

/// The options of the connection that creates and migrates the database: WAL and the rest.
fn options(url: &str) -> anyhow::Result<SqliteConnectOptions> {
    Ok(SqliteConnectOptions::from_str(url)?
        .busy_timeout(Duration::from_secs(5))
        .foreign_keys(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal))
}

/// What every pooled connection sets, whatever the journal mode: a writer waits up to 5 s
/// for another's lock, and foreign keys hold.
const PER_CONNECTION: &str = "PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;";

/// The same for a database `connect` put in WAL mode, where NORMAL synchronisation keeps
/// every commit durable against a crash of the process (only a power cut can lose the last).
const PER_CONNECTION_WAL: &str =
    "PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;";

/// The pool every query goes through: sqlx's `Any` driver, so the same functions serve the
/// PostgreSQL store once it is chosen by URL.
async fn pool(url: &str, per_connection: &'static str) -> sqlx::Result<AnyPool> {
    install_drivers();
    let on_sqlite = per_connection != postgres::PER_CONNECTION;
    AnyPoolOptions::new()
        // A SQLite connection is a file handle in this process: no network or server restart
        // can break it behind our back, so the default ping before every acquire would only
        // double each query's round trips through sqlx's per-connection thread (measured: the
        // dashboard's throughput is bound by exactly those round trips). A PostgreSQL
        // connection can be cut by the network or a failover, so it is pinged.
        .test_before_acquire(!on_sqlite)
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(10))
        .after_connect(move |conn, _| {
            Box::pin(async move { conn.execute(per_connection).await.map(|_| ()) })
        })
        .connect(url)
        .await
}

/// Registers the stores `Any` connections may open: SQLite and PostgreSQL. Idempotent.
pub fn install_drivers() {
    static DRIVERS: Once = Once::new();
    DRIVERS.call_once(|| {
        // Fails only when already installed, which `Once` rules out.
        let _ =
            sqlx::any::install_drivers(&[sqlx::sqlite::any::DRIVER, sqlx::postgres::any::DRIVER]);
    });
}

/// The newest migration this binary carries.
pub fn latest_migration() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// The key of PostgreSQL's transaction-scoped advisory lock that every write transaction
/// takes (an arbitrary constant: "headroom" in ASCII, truncated).
const WRITE_LOCK: i64 = 0x6865_6164_726f_6f6d;

/// Starts a write transaction that takes the write lock up front, so writers run one at a
/// time and never deadlock upgrading from a read lock. SQLite: `BEGIN IMMEDIATE` (its one
/// write lock, at once). PostgreSQL: a transaction that first takes one advisory lock shared
/// by every headroom writer, so read-then-write steps (a compare-and-set of a request's
/// state, the audit chain's next link) see what the previous writer committed, as on SQLite.
pub async fn begin_write(pool: &AnyPool) -> sqlx::Result<sqlx::Transaction<'static, sqlx::Any>> {
    match Dialect::of_pool(pool) {
        Dialect::Sqlite => pool.begin_with("BEGIN IMMEDIATE").await,
        Dialect::Postgres => {
            let mut tx = pool.begin().await?;
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(WRITE_LOCK)
                .execute(&mut *tx)
                .await?;
            Ok(tx)
        }
    }
}

/// The database server's clock in Unix milliseconds, on PostgreSQL (shared by instances on
/// several machines); `None` on SQLite, whose clock is this machine's.
pub async fn server_clock_ms(conn: &mut AnyConnection) -> sqlx::Result<Option<i64>> {
    if Dialect::of(conn) == Dialect::Sqlite {
        return Ok(None);
    }
    sqlx::query_scalar("SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)")
        .fetch_one(conn)
        .await
        .map(Some)
}

/// Whether the database answers.
pub async fn ping(conn: &mut AnyConnection) -> sqlx::Result<()> {
    sqlx::query("SELECT 1").execute(conn).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use sqlx::{AnyConnection, Connection};

    /// The file SQLite says a connection has open.
    async fn open_file(conn: &mut AnyConnection) -> String {
        sqlx::query_scalar("SELECT file FROM pragma_database_list WHERE name = 'main'")
            .fetch_one(conn)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_file_url_names_exactly_that_file_whatever_its_path_holds() {
        let dir = tempfile::tempdir().unwrap();
        // `%41` must not become `A`, `..` must mean the parent, `?` and `#` are no query.
        let odd = dir.path().join("a%41 b?#é");
        std::fs::create_dir(&odd).unwrap();
        std::fs::create_dir(dir.path().join("aA b?#é")).unwrap();
        std::fs::create_dir(odd.join("sub")).unwrap();
        let file = odd.join("h.db");
        std::fs::write(&file, b"").unwrap();
        let wanted = std::fs::canonicalize(&file).unwrap();
        super::install_drivers();
        for named in [file.clone(), odd.join("sub").join("..").join("h.db")] {
            let url = super::sqlite_file_url(&named, "rw").unwrap();
            let mut conn = AnyConnection::connect(&url).await.unwrap();
            assert_eq!(
                open_file(&mut conn).await,
                wanted.to_str().unwrap(),
                "{url}"
            );
        }
        let ro = super::sqlite_file_url(&file, "ro").unwrap();
        let mut conn = AnyConnection::connect(&ro).await.unwrap();
        let write = sqlx::query("CREATE TABLE t (x)").execute(&mut conn).await;
        assert!(write.is_err(), "a read-only URL opened the file writable");
    }

    #[tokio::test]
    async fn an_in_memory_or_missing_database_is_refused_with_its_reason() {
        let memory = super::connect("sqlite::memory:").await.unwrap_err();
        assert!(memory.to_string().contains("in-memory"), "{memory:#}");
        let missing = super::sqlite_file_url(std::path::Path::new("/nonexistent/h.db"), "rw");
        assert!(missing
            .unwrap_err()
            .to_string()
            .contains("/nonexistent/h.db"));
    }
}
