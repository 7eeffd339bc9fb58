//! Which store the suite runs on. `HEADROOM_TEST_STORE=postgres` runs every app the
//! helpers spawn on a database of its own on the throwaway PostgreSQL cluster that
//! `scripts/test.sh` starts (`HEADROOM_TEST_POSTGRES_URL`); otherwise each gets a SQLite file.

use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::{Connection, PgConnection};

/// Whether this run's apps use PostgreSQL.
pub fn on_postgres() -> bool {
    std::env::var("HEADROOM_TEST_STORE").is_ok_and(|s| s == "postgres")
}

/// The test cluster's URL (its maintenance database).
pub fn cluster_url() -> String {
    std::env::var("HEADROOM_TEST_POSTGRES_URL").expect(
        "no HEADROOM_TEST_POSTGRES_URL: run the suite through scripts/test.sh, which starts a \
         throwaway PostgreSQL, or build with HEADROOM_SKIP_POSTGRES=1 to mark these ignored",
    )
}

/// A database for one app: a new PostgreSQL database when the run is on PostgreSQL, else a
/// SQLite file in `dir`.
pub async fn database_url(dir: &std::path::Path) -> String {
    if on_postgres() {
        fresh_database().await
    } else {
        format!("sqlite:{}", dir.join("headroom.db").display())
    }
}

/// A new, empty database on the test cluster, and its URL.
pub async fn fresh_database() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "t_{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let admin = cluster_url();
    let mut conn = PgConnection::connect(&admin).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let mut url = url::Url::parse(&admin).unwrap();
    url.set_path(&format!("/{name}"));
    url.to_string()
}

/// SQL reading member `key` of the JSON text in `column`, as text, in this run's dialect.
pub fn json_member(column: &str, key: &str) -> String {
    if on_postgres() {
        format!("({column}::json ->> '{key}')")
    } else {
        format!("json_extract({column}, '$.{key}')")
    }
}

/// The PostgreSQL tables any of whose rows, printed as text, hold `needle` or its hex (how a
/// BYTEA column prints): a secret scan of the store, as reading SQLite's files is on SQLite.
pub async fn tables_holding(pool: &sqlx::AnyPool, needle: &str) -> Vec<String> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        tables.len() >= 12,
        "the schema's tables are listed: {tables:?}"
    );
    let hex: String = needle.bytes().map(|b| format!("{b:02x}")).collect();
    let mut found = Vec::new();
    for table in tables {
        // Names read from the catalogue, not from input.
        let sql = format!("SELECT COALESCE(string_agg(t::text, E'\\n'), '') FROM \"{table}\" t");
        let text: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(pool)
            .await
            .unwrap();
        if text.contains(needle) || text.contains(&hex) {
            found.push(table);
        }
    }
    found
}

/// True (and says so) when this run is on PostgreSQL, where a check of SQLite's query plans
/// does not apply: PostgreSQL's planner chooses by table statistics, and that its indexes
/// match SQLite's is the schema comparison's (`postgres.rs`). The check runs on SQLite.
pub fn planner_is_not_sqlites(what: &str) -> bool {
    let skip = on_postgres();
    if skip {
        println!("{what}: SQLite's query plan is not checked on PostgreSQL");
    }
    skip
}
