//! The PostgreSQL store's schema (issue 19, first part): its migrations apply through
//! `headroom migrate`, it matches SQLite's schema table by table, column by column, key by key
//! and index by index, and its constraints and triggers refuse and do what SQLite's do, the
//! running-machine counters over generated sequences of changes included.
//!
//! The cluster is the one `scripts/test.sh` starts (`scripts/postgres.sh`), named by
//! `HEADROOM_TEST_POSTGRES_URL`; each test makes a database of its own on it. Built with
//! `HEADROOM_SKIP_POSTGRES=1`, these tests are reported as ignored (never in CI).

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use sqlx::{Connection, PgConnection, SqliteConnection};

use crate::helpers::store::fresh_database;

/// Both stores, migrated by the product's own migrators.
async fn both_stores() -> (SqliteConnection, PgConnection) {
    let mut lite = SqliteConnection::connect("sqlite::memory:").await.unwrap();
    sqlx::raw_sql("PRAGMA foreign_keys = ON")
        .execute(&mut lite)
        .await
        .unwrap();
    headroom::db::MIGRATOR.run(&mut lite).await.unwrap();
    let mut pg = PgConnection::connect(&fresh_database().await)
        .await
        .unwrap();
    headroom::db::postgres::MIGRATOR.run(&mut pg).await.unwrap();
    (lite, pg)
}

/// `headroom --database-url URL ARGS…` (the CLI tests' runner, with nothing on stdin).
fn headroom(url: &str, args: &[&str]) -> (i32, String, String) {
    crate::cli::run(url, args, "")
}

#[tokio::test]
#[cfg_attr(
    headroom_skip_postgres,
    ignore = "HEADROOM_SKIP_POSTGRES was set when the tests were built"
)]
async fn headroom_migrate_creates_the_postgres_schema_once_at_sqlites_version() {
    let url = fresh_database().await;
    for run in 1..=2 {
        let (code, out, err) = headroom(&url, &["migrate"]);
        assert_eq!(code, 0, "run {run}: {err}");
        assert!(out.contains("is migrated"), "run {run}: {out}");
    }
    let mut conn = PgConnection::connect(&url).await.unwrap();

    // A database in another encoding is refused by name, and nothing of the schema is left.
    let latin1 = format!(
        "{}_latin1",
        url.split('?').next().unwrap().rsplit('/').next().unwrap()
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE {latin1} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' \
         TEMPLATE template0"
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    let mut other = url::Url::parse(&url).unwrap();
    other.set_path(&format!("/{latin1}"));
    let (code, _, err) = headroom(other.as_str(), &["migrate"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("needs a UTF8 database, this one is LATIN1"),
        "{err}"
    );
    let mut refused = PgConnection::connect(other.as_str()).await.unwrap();
    let (tables,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM information_schema.tables
         WHERE table_schema = 'public' AND table_name NOT LIKE '\\_sqlx%'",
    )
    .fetch_one(&mut refused)
    .await
    .unwrap();
    assert_eq!(tables, 0);

    let applied: Vec<(i64, bool)> =
        sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    let newest = headroom::db::latest_migration();
    assert_eq!(applied.last(), Some(&(newest, true)));
    assert_eq!(headroom::db::postgres::latest_migration(), newest);

    // One baseline for SQLite's first 22, then every later migration in both folders.
    let lite: BTreeSet<i64> = headroom::db::MIGRATOR.iter().map(|m| m.version).collect();
    let pg: BTreeSet<i64> = headroom::db::postgres::MIGRATOR
        .iter()
        .map(|m| m.version)
        .collect();
    let expected: BTreeSet<i64> = lite.iter().copied().filter(|v| *v >= 22).collect();
    assert_eq!(pg, expected, "every SQLite migration after 22 needs a twin");
}

#[tokio::test]
#[cfg_attr(
    headroom_skip_postgres,
    ignore = "HEADROOM_SKIP_POSTGRES was set when the tests were built"
)]
async fn on_postgres_the_commands_run_backup_points_to_pg_dump_and_no_password_is_taken_or_shown() {
    let url = fresh_database().await;
    assert_eq!(headroom(&url, &["migrate"]).0, 0);
    let add = ["user", "add", "root", "--role", "admin", "--password-stdin"];
    let (code, out, err) = crate::cli::run(&url, &add, "a long enough password\n");
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = headroom(&url, &["user", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("root"), "{out}");
    let (code, out, err) = headroom(&url, &["audit", "verify"]);
    assert_eq!(code, 0, "{out}{err}");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.db");
    let (code, _, err) = headroom(&url, &["backup", copy.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("pg_dump"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    // No server: the cause, at once, not a pool's timeout.
    let started = std::time::Instant::now();
    let (code, _, err) = headroom("postgres://headroom@127.0.0.1:9/headroom", &["migrate"]);
    assert_eq!(code, 1);
    assert!(err.to_lowercase().contains("refused"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));

    // A password in the URL is refused before anything connects, and never repeated.
    let secret = "pw-do-not-print-7f3a";
    for with_password in [
        format!("postgres://headroom:{secret}@127.0.0.1:9/x"),
        format!("postgresql://headroom@127.0.0.1:9/x?password={secret}"),
    ] {
        for args in [&["migrate"][..], &["settings"]] {
            let (code, out, err) = headroom(&with_password, args);
            assert_eq!(code, 1, "{args:?}");
            assert!(err.contains("must not carry a password"), "{err}");
            assert!(!out.contains(secret) && !err.contains(secret), "{err}");
        }
    }
}

/// A table's columns as (name, PostgreSQL type, not null, default), in order.
type Columns = Vec<(String, String, bool, Option<String>)>;

/// The schema as both stores can describe it: columns, primary and unique keys, indexes
/// (name → table, unique, columns, predicate), foreign keys, the number of CHECK constraints
/// per table and triggers (name → when, event and table).
#[derive(Debug, Default, PartialEq)]
struct Schema {
    columns: BTreeMap<String, Columns>,
    primary_keys: BTreeMap<String, String>,
    unique_keys: BTreeSet<(String, String)>,
    indexes: BTreeMap<String, (String, bool, String, String)>,
    foreign_keys: BTreeSet<(String, String, String, String, String)>,
    checks: BTreeMap<String, usize>,
    triggers: BTreeMap<String, String>,
}

/// An expression or default as both stores would print it: no casts, brackets, case or
/// extra spaces, and booleans as SQLite stores them.
fn normalised(expr: &str) -> String {
    let bare: String = expr
        .replace("::text", "")
        .replace("::bigint", "")
        .chars()
        .filter(|c| *c != '(' && *c != ')')
        .collect();
    let words = bare.split_whitespace().collect::<Vec<_>>().join(" ");
    match words.to_lowercase().as_str() {
        "false" => "0".to_owned(),
        "true" => "1".to_owned(),
        lower => lower.to_owned(),
    }
}

/// A trigger's head, `(name, "BEFORE UPDATE OF a b ON table")`, from its CREATE statement in
/// either dialect (PostgreSQL's `pg_get_triggerdef` qualifies the table and puts commas
/// between columns).
fn trigger_head(sql: &str) -> (String, String) {
    let spaced = sql.replace(',', " ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| w.eq_ignore_ascii_case("trigger"))
        .expect("CREATE TRIGGER");
    let on = words[at..]
        .iter()
        .position(|w| w.eq_ignore_ascii_case("on"))
        .expect("ON")
        + at;
    let table = words[on + 1].trim_start_matches("public.");
    let head = words[at + 2..on]
        .iter()
        .map(|w| w.to_uppercase())
        .collect::<Vec<_>>()
        .join(" ");
    (words[at + 1].to_owned(), format!("{head} ON {table}"))
}

async fn sqlite_schema(conn: &mut SqliteConnection) -> Schema {
    let mut s = Schema::default();
    let tables: Vec<(String, String)> = sqlx::query_as(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table'
           AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_sqlx%' ESCAPE '\\'",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    for (table, sql) in tables {
        let cols: Vec<(String, String, bool, i64, Option<String>)> = sqlx::query_as(
            "SELECT name, type, \"notnull\", pk, dflt_value FROM pragma_table_info(?1)
             ORDER BY cid",
        )
        .bind(&table)
        .fetch_all(&mut *conn)
        .await
        .unwrap();
        let mut pk: Vec<(i64, String)> = Vec::new();
        let mut columns = Columns::new();
        let mut checks = sql.matches("CHECK (").count();
        for (name, ty, not_null, pk_seq, default) in cols {
            // A 0/1 flag SQLite checks is PostgreSQL's BOOLEAN, which needs no check.
            let flag = sql.contains(&format!("CHECK ({name} IN (0, 1))"));
            checks -= usize::from(flag);
            let pg_type = match (ty.as_str(), flag) {
                ("INTEGER", true) => "boolean",
                ("INTEGER", false) => "bigint",
                ("TEXT", _) => "text",
                ("BLOB", _) => "bytea",
                (other, _) => panic!("{table}.{name}: no PostgreSQL type for {other}"),
            };
            if pk_seq > 0 {
                pk.push((pk_seq, name.clone()));
            }
            // Key columns are never null in PostgreSQL; in SQLite's tables they never are
            // either, as the product writes them.
            columns.push((
                name,
                pg_type.to_owned(),
                not_null || pk_seq > 0,
                default.as_deref().map(normalised),
            ));
        }
        if checks > 0 {
            s.checks.insert(table.clone(), checks);
        }
        pk.sort();
        let pk: Vec<String> = pk.into_iter().map(|(_, n)| n).collect();
        if !pk.is_empty() {
            s.primary_keys.insert(table.clone(), pk.join(","));
        }
        s.columns.insert(table.clone(), columns);

        let indexes: Vec<(String, bool, String, bool)> =
            sqlx::query_as("SELECT name, \"unique\", origin, partial FROM pragma_index_list(?1)")
                .bind(&table)
                .fetch_all(&mut *conn)
                .await
                .unwrap();
        for (index, unique, origin, partial) in indexes {
            let cols: Vec<(String,)> =
                sqlx::query_as("SELECT name FROM pragma_index_info(?1) ORDER BY seqno")
                    .bind(&index)
                    .fetch_all(&mut *conn)
                    .await
                    .unwrap();
            let cols = cols.into_iter().map(|(c,)| c).collect::<Vec<_>>().join(",");
            match origin.as_str() {
                "c" => {
                    let predicate = if partial {
                        let (sql,): (String,) = sqlx::query_as(
                            "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?1",
                        )
                        .bind(&index)
                        .fetch_one(&mut *conn)
                        .await
                        .unwrap();
                        let (_, predicate) = sql.split_once(" WHERE ").expect("a WHERE");
                        normalised(predicate)
                    } else {
                        String::new()
                    };
                    s.indexes
                        .insert(index, (table.clone(), unique, cols, predicate));
                }
                "u" => {
                    s.unique_keys.insert((table.clone(), cols));
                }
                _ => {} // the primary key, compared above
            }
        }

        let fks: Vec<(String, String, String, String)> = sqlx::query_as(
            "SELECT \"from\", \"table\", \"to\", on_delete FROM pragma_foreign_key_list(?1)",
        )
        .bind(&table)
        .fetch_all(&mut *conn)
        .await
        .unwrap();
        for (from, to_table, to, on_delete) in fks {
            s.foreign_keys
                .insert((table.clone(), from, to_table, to, on_delete));
        }
    }
    let triggers: Vec<(String,)> =
        sqlx::query_as("SELECT sql FROM sqlite_master WHERE type = 'trigger'")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    s.triggers = triggers.iter().map(|(sql,)| trigger_head(sql)).collect();
    s
}

async fn postgres_schema(conn: &mut PgConnection) -> Schema {
    let mut s = Schema::default();
    let cols: Vec<(String, String, String, String, Option<String>)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text,
                column_default::text
         FROM information_schema.columns
         WHERE table_schema = 'public' AND table_name NOT LIKE '\\_sqlx%'
         ORDER BY table_name, ordinal_position",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    for (table, name, ty, nullable, default) in cols {
        s.columns.entry(table).or_default().push((
            name,
            ty,
            nullable == "NO",
            default.as_deref().map(normalised),
        ));
    }
    let keys: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT c.conrelid::regclass::text, c.contype::text,
                string_agg(a.attname::text, ',' ORDER BY k.n)
         FROM pg_constraint c
         CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
         WHERE c.contype IN ('p', 'u') AND c.connamespace = 'public'::regnamespace
           AND c.conrelid::regclass::text NOT LIKE '\\_sqlx%'
         GROUP BY c.oid, c.conrelid, c.contype",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    for (table, kind, cols) in keys {
        if kind == "p" {
            s.primary_keys.insert(table, cols);
        } else {
            s.unique_keys.insert((table, cols));
        }
    }
    let indexes: Vec<(String, String, bool, String, String)> = sqlx::query_as(
        "SELECT i.relname::text, t.relname::text, x.indisunique,
                COALESCE(pg_get_expr(x.indpred, x.indrelid), ''),
                string_agg(a.attname::text, ',' ORDER BY k.n)
         FROM pg_index x
         JOIN pg_class i ON i.oid = x.indexrelid
         JOIN pg_class t ON t.oid = x.indrelid
         CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
         JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
         WHERE t.relnamespace = 'public'::regnamespace AND t.relname NOT LIKE '\\_sqlx%'
           AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)
         GROUP BY i.relname, t.relname, x.indisunique, x.indpred, x.indrelid",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    for (index, table, unique, predicate, cols) in indexes {
        s.indexes
            .insert(index, (table, unique, cols, normalised(&predicate)));
    }
    let checks: Vec<(String, i64)> = sqlx::query_as(
        "SELECT conrelid::regclass::text, COUNT(*) FROM pg_constraint
         WHERE contype = 'c' AND connamespace = 'public'::regnamespace GROUP BY conrelid",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    s.checks = checks
        .into_iter()
        .map(|(t, n)| (t, usize::try_from(n).unwrap()))
        .collect();
    let fks: Vec<(String, String, String, String, String)> = sqlx::query_as(
        "SELECT c.conrelid::regclass::text, a.attname::text, c.confrelid::regclass::text,
                af.attname::text,
                CASE c.confdeltype WHEN 'a' THEN 'NO ACTION' WHEN 'r' THEN 'RESTRICT'
                    WHEN 'c' THEN 'CASCADE' WHEN 'n' THEN 'SET NULL' ELSE 'SET DEFAULT' END
         FROM pg_constraint c
         CROSS JOIN LATERAL unnest(c.conkey, c.confkey) AS k(attnum, refnum)
         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
         JOIN pg_attribute af ON af.attrelid = c.confrelid AND af.attnum = k.refnum
         WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    s.foreign_keys = fks.into_iter().collect();
    let triggers: Vec<(String,)> =
        sqlx::query_as("SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    s.triggers = triggers.iter().map(|(sql,)| trigger_head(sql)).collect();
    s
}

/// The triggers only PostgreSQL has: TRUNCATE skips row triggers there, so the tables SQLite
/// protects from DELETE, or counts through row triggers, refuse TRUNCATE too.
const POSTGRES_ONLY_TRIGGERS: [(&str, &str); 8] = [
    ("audit_log_no_truncate", "BEFORE TRUNCATE ON audit_log"),
    // audit_head is what sqlite_sequence is to SQLite (migration 0023).
    ("audit_log_moves_head", "AFTER INSERT ON audit_log"),
    ("audit_head_never_lowered", "BEFORE UPDATE ON audit_head"),
    ("audit_head_no_delete", "BEFORE DELETE ON audit_head"),
    ("audit_head_no_truncate", "BEFORE TRUNCATE ON audit_head"),
    (
        "template_versions_kept_whole",
        "BEFORE TRUNCATE ON template_versions",
    ),
    (
        "machine_config_versions_kept_whole",
        "BEFORE TRUNCATE ON machine_config_versions",
    ),
    (
        "provision_machines_counted",
        "BEFORE TRUNCATE ON provision_machines",
    ),
];

#[tokio::test]
#[cfg_attr(
    headroom_skip_postgres,
    ignore = "HEADROOM_SKIP_POSTGRES was set when the tests were built"
)]
async fn the_postgres_schema_matches_sqlites_table_by_table() {
    let (mut lite, mut pg) = both_stores().await;
    let lite = sqlite_schema(&mut lite).await;
    let mut pg = postgres_schema(&mut pg).await;
    // Every category was read at all (an empty comparison proves nothing).
    assert!(lite.columns.len() >= 25, "{:?}", lite.columns.keys());
    assert!(lite.primary_keys.len() >= 25 && lite.unique_keys.len() >= 5);
    assert!(lite.indexes.len() >= 30 && lite.foreign_keys.len() >= 10);
    assert!(lite.checks.len() >= 10 && lite.triggers.len() >= 10);
    let partial = lite.indexes.values().filter(|i| !i.3.is_empty()).count();
    assert_eq!(partial, 2, "{:?}", lite.indexes);
    for (name, head) in POSTGRES_ONLY_TRIGGERS {
        assert_eq!(pg.triggers.remove(name).as_deref(), Some(head), "{name}");
    }
    // PostgreSQL's twin of sqlite_sequence's audit_log row, which SQLite keeps itself.
    let head = pg.columns.remove("audit_head").expect("audit_head");
    assert_eq!(head.len(), 2, "{head:?}");
    assert_eq!(pg.primary_keys.remove("audit_head").as_deref(), Some("one"));
    assert_eq!(pg.checks.remove("audit_head"), Some(2));
    // Field by field, so a difference names itself.
    assert_eq!(
        lite.columns.keys().collect::<Vec<_>>(),
        pg.columns.keys().collect::<Vec<_>>()
    );
    for (table, cols) in &lite.columns {
        assert_eq!(cols, &pg.columns[table], "columns of {table}");
    }
    assert_eq!(lite.primary_keys, pg.primary_keys);
    assert_eq!(lite.unique_keys, pg.unique_keys);
    assert_eq!(lite.indexes, pg.indexes);
    assert_eq!(lite.foreign_keys, pg.foreign_keys);
    assert_eq!(lite.checks, pg.checks);
    assert_eq!(lite.triggers, pg.triggers);
}

async fn on_both(
    lite: &mut SqliteConnection,
    pg: &mut PgConnection,
    sql: &str,
) -> (Result<(), String>, Result<(), String>) {
    let a = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut *lite)
        .await;
    let b = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut *pg)
        .await;
    (
        a.map(|_| ()).map_err(|e| e.to_string()),
        b.map(|_| ()).map_err(|e| e.to_string()),
    )
}

/// Runs one statement on both stores; both must take it.
async fn both_allow(lite: &mut SqliteConnection, pg: &mut PgConnection, sql: &str) {
    let (a, b) = on_both(lite, pg, sql).await;
    assert!(
        a.is_ok() && b.is_ok(),
        "{sql}\nSQLite: {a:?}\nPostgreSQL: {b:?}"
    );
}

/// Runs one statement on both stores; both must refuse it, each saying `why` (any case).
async fn both_refuse(lite: &mut SqliteConnection, pg: &mut PgConnection, sql: &str, why: &str) {
    let (a, b) = on_both(lite, pg, sql).await;
    for (store, outcome) in [("SQLite", a), ("PostgreSQL", b)] {
        match outcome {
            Err(e) if e.to_lowercase().contains(&why.to_lowercase()) => {}
            other => panic!("{sql}\n{store}: {other:?}, wanted a refusal saying {why:?}"),
        }
    }
}

const PROVISION: &str = "INSERT INTO provisions (fleet, machine_config, config_version,
    template, template_version, count, reason, requester, state, plan, plan_hash,
    approvals_required, created_at, updated_at, expires_at)
    VALUES ('prod', 'small', 1, 'base', 1, 2, 'deficit', 'olivia', 'pending_approval',
            '{\"monthly_price\":\"4.50\"}', 'ph', 1, 1, 1, 9)";

#[tokio::test]
#[cfg_attr(
    headroom_skip_postgres,
    ignore = "HEADROOM_SKIP_POSTGRES was set when the tests were built"
)]
async fn both_stores_refuse_and_allow_the_same_writes() {
    let (mut lite, mut pg) = both_stores().await;
    let (l, p) = (&mut lite, &mut pg);

    both_allow(
        l,
        p,
        "INSERT INTO audit_log (at, actor, action, target_kind, target_id, details, prev_hash,
         hash) VALUES (1, 'alice', 'user.created', 'user', 'bob', '{}', '', 'h1')",
    )
    .await;
    both_refuse(
        l,
        p,
        "UPDATE audit_log SET actor = 'mallory'",
        "audit_log is append-only",
    )
    .await;
    both_refuse(l, p, "DELETE FROM audit_log", "audit_log is append-only").await;
    let truncate = sqlx::raw_sql("TRUNCATE audit_log").execute(&mut *p).await;
    assert!(
        truncate.is_err_and(|e| e.to_string().contains("audit_log is append-only")),
        "TRUNCATE must be refused"
    );

    both_allow(
        l,
        p,
        "INSERT INTO templates (name, created_at) VALUES ('base', 1)",
    )
    .await;
    let version = "INSERT INTO template_versions (template_id, version, body, author, created_at)
                   VALUES (1, 1, 'x', 'alice', 1)";
    both_allow(l, p, version).await;
    both_refuse(l, p, version, "unique").await;
    both_refuse(
        l,
        p,
        "UPDATE template_versions SET body = 'y'",
        "template versions are immutable",
    )
    .await;
    both_refuse(
        l,
        p,
        "DELETE FROM template_versions",
        "template versions are kept",
    )
    .await;
    for (table, message) in [
        ("template_versions", "template versions are kept"),
        (
            "machine_config_versions",
            "machine config versions are kept",
        ),
        ("provision_machines", "deleted row by row"),
    ] {
        let truncate = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("TRUNCATE {table}")))
            .execute(&mut *p)
            .await;
        assert!(
            truncate.is_err_and(|e| e.to_string().contains(message)),
            "TRUNCATE {table} must be refused"
        );
    }

    both_allow(l, p, PROVISION).await;
    both_allow(
        l,
        p,
        "INSERT INTO provision_approvals (provision_id, approver, plan_hash, approved_at, state)
         VALUES (1, 'alex', 'ph', 2, 'pending_approval')",
    )
    .await;
    for change in [
        "plan = '{}'",
        "requester = 'alex'",
        "fleet = 'staging'",
        "machine_config = 'large'",
    ] {
        let sql = format!("UPDATE provisions SET {change} WHERE id = 1");
        both_refuse(l, p, &sql, "plan never change").await;
    }
    // Setting the same value is no change; the state moves, and the approvals' copy with it.
    both_allow(
        l,
        p,
        "UPDATE provisions SET fleet = 'prod', state = 'approved' WHERE id = 1",
    )
    .await;
    let copy = "SELECT state FROM provision_approvals WHERE provision_id = 1";
    let a: (String,) = sqlx::query_as(copy).fetch_one(&mut *l).await.unwrap();
    let b: (String,) = sqlx::query_as(copy).fetch_one(&mut *p).await.unwrap();
    assert_eq!((a.0.as_str(), b.0.as_str()), ("approved", "approved"));

    for bad in [
        "INSERT INTO users (username, role, password_hash, created_at, updated_at)
         VALUES ('root', 'root', 'h', 1, 1)",
        &PROVISION.replace("1, 2, 'deficit'", "1, 21, 'deficit'"),
        &PROVISION.replace("'pending_approval'", "'done'"),
        "INSERT INTO webhook_deliveries (event, body, state, next_attempt_at, created_at)
         VALUES ('x', '{}', 'lost', 1, 1)",
        "INSERT INTO catalogue VALUES ('hetzner', 'volume', 'x', '{}', 1)",
        "INSERT INTO pin_checks VALUES ('https://x', 'h', 'maybe', '', 1, 'alice')",
        "INSERT INTO provision_machines (provision_id, idx, name, sha256, size_bytes,
         redacted_payload, status, updated_at) VALUES (1, 0, 'm', 'h', 1, '', 'lost', 1)",
        "INSERT INTO fleet_changes (fleet, at, actor, kind, changes)
         VALUES ('prod', 1, 'alice', 'renamed', '{}')",
    ] {
        both_refuse(l, p, bad, "check").await;
    }
    both_allow(
        l,
        p,
        "INSERT INTO fleets (name, spec, restore_machine_config, created_at, updated_at,
         updated_by) VALUES ('prod', '{}', 'small', 1, 1, 'alice')",
    )
    .await;
    let sample = "INSERT INTO fleet_samples (fleet_id, at, ok, source, spare, required,
                  latency_ms, error) VALUES (1, 1, ";
    for bad in [
        "TRUE, 'native', NULL, NULL, 1, NULL)",  // ok without figures
        "FALSE, 'native', NULL, NULL, 1, NULL)", // failed without a reason
        "TRUE, 'native', 2, 1, 1, 'x')",         // ok with an error
        "FALSE, 'guess', NULL, NULL, 1, 'x')",   // unknown source
    ] {
        both_refuse(l, p, &format!("{sample}{bad}"), "check").await;
    }
    both_allow(l, p, &format!("{sample}TRUE, 'native', 2, 1, 1, NULL)")).await;
    both_refuse(
        l,
        p,
        "INSERT INTO fleet_status (fleet_id, sampled_at, ok, source, latency_ms)
         VALUES (1, 1, TRUE, 'guess', 1)",
        "check",
    )
    .await;
    let deficit = "INSERT INTO fleet_deficits (fleet_id, started_at, detected_at, spare,
                   required, evidence, ended_at) VALUES (1, 1, 5, 0, 1, '{}', ";
    both_refuse(l, p, &format!("{deficit}4)"), "check").await;
    both_allow(l, p, &format!("{deficit}5)")).await;
    both_refuse(
        l,
        p,
        "INSERT INTO fleet_rollups (fleet_id, resolution, bucket, samples, ok_samples, last_at,
         source_last) VALUES (1, 61, 0, 1, 1, 1, 'native')",
        "check",
    )
    .await;
    // A key of the wrong length (the blob literals differ: x'…' and '\x…'::bytea).
    let short = sqlx::raw_sql("INSERT INTO instance_keys VALUES ('csrf', x'00', 1)")
        .execute(&mut *l)
        .await;
    assert!(short.is_err_and(|e| e.to_string().to_lowercase().contains("check")));
    let short = sqlx::raw_sql("INSERT INTO instance_keys VALUES ('csrf', '\\x00'::bytea, 1)")
        .execute(&mut *p)
        .await;
    assert!(short.is_err_and(|e| e.to_string().to_lowercase().contains("check")));
}

/// One change to `provision_machines` (machine k is `idx` k, name `m<k>`).
#[derive(Debug, Clone)]
enum MachineChange {
    Insert {
        k: u8,
        provision: u8,
        server: bool,
        status: u8,
    },
    SetServer {
        k: u8,
        server: bool,
    },
    SetStatus {
        k: u8,
        status: u8,
    },
    Move {
        k: u8,
        provision: u8,
    },
    Delete {
        k: u8,
    },
}

const STATUSES: [&str; 6] = [
    "planned",
    "creating",
    "booting",
    "created",
    "failed",
    "destroyed",
];

impl MachineChange {
    fn sql(&self) -> String {
        let server = |s: bool| if s { "7" } else { "NULL" };
        match *self {
            Self::Insert {
                k,
                provision,
                server: s,
                status,
            } => format!(
                "INSERT INTO provision_machines (provision_id, idx, name, sha256, size_bytes,
                 redacted_payload, status, server_id, updated_at)
                 VALUES ({}, {k}, 'm{k}', 'h', 1, '', '{}', {}, 1)",
                provision + 1,
                STATUSES[usize::from(status)],
                server(s)
            ),
            Self::SetServer { k, server: s } => {
                format!(
                    "UPDATE provision_machines SET server_id = {} WHERE idx = {k}",
                    server(s)
                )
            }
            Self::SetStatus { k, status } => format!(
                "UPDATE provision_machines SET status = '{}' WHERE idx = {k}",
                STATUSES[usize::from(status)]
            ),
            Self::Move { k, provision } => format!(
                "UPDATE provision_machines SET provision_id = {} WHERE idx = {k}",
                provision + 1
            ),
            Self::Delete { k } => format!("DELETE FROM provision_machines WHERE idx = {k}"),
        }
    }
}

fn machine_change() -> impl Strategy<Value = MachineChange> {
    let k = 0u8..6;
    prop_oneof![
        (k.clone(), 0u8..3, any::<bool>(), 0u8..6).prop_map(|(k, provision, server, status)| {
            MachineChange::Insert {
                k,
                provision,
                server,
                status,
            }
        }),
        (k.clone(), any::<bool>()).prop_map(|(k, server)| MachineChange::SetServer { k, server }),
        (k.clone(), 0u8..6).prop_map(|(k, status)| MachineChange::SetStatus { k, status }),
        (k.clone(), 0u8..3).prop_map(|(k, provision)| MachineChange::Move { k, provision }),
        k.prop_map(|k| MachineChange::Delete { k }),
    ]
}

/// The running machines per fleet and price, as the triggers keep them and as counted afresh.
const KEPT: &str = "SELECT fleet, monthly_price, machines FROM fleet_running_machines
                    WHERE machines <> 0 ORDER BY fleet, monthly_price";
const COUNTED: &str = "SELECT p.fleet, COALESCE(p.plan_price, ''), COUNT(*)
    FROM provision_machines m JOIN (SELECT id, fleet, CASE id WHEN 1 THEN '4.50'
        WHEN 3 THEN '9.00' END AS plan_price FROM provisions) p ON p.id = m.provision_id
    WHERE m.server_id IS NOT NULL AND m.status <> 'destroyed'
    GROUP BY p.fleet, COALESCE(p.plan_price, '') ORDER BY 1, 2";

#[test]
#[cfg_attr(
    headroom_skip_postgres,
    ignore = "HEADROOM_SKIP_POSTGRES was set when the tests were built"
)]
fn both_stores_count_running_machines_alike_over_any_changes() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let stores = rt.block_on(async {
        let (mut l, mut p) = both_stores().await;
        // Three requests: two fleets, two prices and one plan without a price.
        for (fleet, plan) in [
            ("prod", "{\"monthly_price\":\"4.50\"}"),
            ("prod", "{}"),
            ("edge", "{\"monthly_price\":\"9.00\",\"machines\":[]}"),
        ] {
            let sql = PROVISION
                .replace("'prod'", &format!("'{fleet}'"))
                .replace("'{\"monthly_price\":\"4.50\"}'", &format!("'{plan}'"));
            both_allow(&mut l, &mut p, &sql).await;
        }
        // The property's closure may only share them: one case at a time takes both.
        tokio::sync::Mutex::new((l, p))
    });
    let config = ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    };
    proptest!(config, |(changes in proptest::collection::vec(machine_change(), 1..40))| {
        rt.block_on(async {
            let mut both = stores.lock().await;
            let (lite, pg) = &mut *both;
            for store in ["DELETE FROM provision_machines", "DELETE FROM fleet_running_machines"] {
                both_allow(lite, pg, store).await;
            }
            for change in &changes {
                let sql = change.sql();
                let (a, b) = on_both(lite, pg, &sql).await;
                // An insert of a machine that exists fails on both; nothing else may differ.
                assert_eq!(a.is_ok(), b.is_ok(), "{sql}: SQLite {a:?}, PostgreSQL {b:?}");
            }
            let kept_lite: Vec<(String, String, i64)> =
                sqlx::query_as(KEPT).fetch_all(&mut *lite).await.unwrap();
            let kept_pg: Vec<(String, String, i64)> =
                sqlx::query_as(KEPT).fetch_all(&mut *pg).await.unwrap();
            let counted_lite: Vec<(String, String, i64)> =
                sqlx::query_as(COUNTED).fetch_all(&mut *lite).await.unwrap();
            let counted_pg: Vec<(String, String, i64)> =
                sqlx::query_as(COUNTED).fetch_all(&mut *pg).await.unwrap();
            assert_eq!(&counted_lite, &counted_pg, "the machines after {changes:?}");
            assert_eq!(&kept_lite, &counted_lite, "SQLite's counters after {changes:?}");
            assert_eq!(&kept_pg, &counted_pg, "PostgreSQL's counters after {changes:?}");
        });
    });
}

#[tokio::test]
#[cfg_attr(
    headroom_skip_postgres,
    ignore = "HEADROOM_SKIP_POSTGRES was set when the tests were built"
)]
async fn instances_migrating_one_database_at_once_apply_each_migration_once() {
    let url = fresh_database().await;
    let starts: Vec<_> = (0..6)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || headroom(&url, &["migrate"]))
        })
        .collect();
    for start in starts {
        let (code, _, err) = start.join().unwrap();
        assert_eq!(code, 0, "{err}");
    }
    let mut conn = PgConnection::connect(&url).await.unwrap();
    let applied: Vec<(i64, bool)> =
        sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    let expected: Vec<(i64, bool)> = headroom::db::postgres::MIGRATOR
        .iter()
        .map(|m| (m.version, true))
        .collect();
    assert_eq!(applied, expected);
}
