//! `headroom backup FILE`: copies taken while the real binary provisions are each consistent
//! (integrity, foreign keys, the audit chain), owner-only and never half-written; a copy of a
//! stopped database reads back row for row; a mid-run copy restored and started finishes the
//! work with no second server for any machine; and the command refuses bad destinations by
//! naming the field and the rule.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use headroom::auth::Caller;
use headroom::domain::ProvisionState;
use headroom::provisioning::requests;
use sqlx::{AnyConnection, Connection};

use crate::crash::{finished, offline_ctx, prepare, start, wait_until_serving};
use crate::fake_hetzner::FakeHetzner;

/// A connection of its own to the database at `url`. The `Any` drivers are installed first:
/// run alone, these tests may be the first in the process to open one.
async fn connect(url: &str) -> AnyConnection {
    headroom::db::install_drivers();
    AnyConnection::connect(url).await.unwrap()
}

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

/// `headroom --database-url DB backup FILE`: exit code, stdout, stderr.
fn backup(db: &str, file: &std::ffi::OsStr) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(["--database-url", db, "backup"])
        .arg(file)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The names in folder `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn sqlite_url(path: &Path) -> String {
    format!("sqlite:{}", path.display())
}

/// Every row of every table, each as its quoted values, tables by name and rows sorted: two
/// databases with equal dumps hold the same state.
async fn dump(path: &Path) -> Vec<(String, Vec<String>)> {
    let url = format!("sqlite:{}?mode=ro", path.display());
    let mut conn = connect(&url).await;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
         ORDER BY name",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut out = Vec::new();
    for table in tables {
        let columns: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info($1)")
            .bind(&table)
            .fetch_all(&mut conn)
            .await
            .unwrap();
        let row = columns
            .iter()
            .map(|c| format!("quote(\"{c}\")"))
            .collect::<Vec<_>>()
            .join(" || '|' || ");
        // Names read from the schema itself, quoted.
        let sql = format!("SELECT {row} FROM \"{table}\"");
        let mut rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_all(&mut conn)
            .await
            .unwrap();
        rows.sort();
        out.push((table, rows));
    }
    out
}

/// Audit entries in the database at `path`.
async fn audit_entries(path: &Path) -> i64 {
    let url = format!("sqlite:{}?mode=ro", path.display());
    let mut conn = connect(&url).await;
    sqlx::query_scalar("SELECT COUNT(*) FROM audit_log")
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

fn migrate(db: &str) {
    let out = Command::new(BIN)
        .args(["--database-url", db, "migrate"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

fn audit_verifies(db: &str) -> bool {
    Command::new(BIN)
        .args(["--database-url", db, "audit", "verify"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
        .status
        .success()
}

#[tokio::test]
async fn backups_taken_while_the_server_provisions_are_whole_and_a_restored_one_finishes_the_work()
{
    let fake = FakeHetzner::start().await;
    // Slow creates, so the work outlasts several backups.
    fake.set_action_polls(4);
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.db");
    let db = sqlite_url(&live);
    let (ctx, ids) = prepare(&db, &fake).await;

    let (mut server, log) = start(dir.path(), &db, &fake, 0);
    wait_until_serving(&log).await;
    let mut copies = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let done = finished(&ctx, &ids).await;
        if done == ids.len() {
            break;
        }
        assert!(Instant::now() < deadline, "requests never finished");
        let path = dir.path().join(format!("copy-{}.db", copies.len()));
        let (code, out, err) = backup(&db, path.as_os_str());
        assert_eq!(code, 0, "backup while serving: {out}{err}");
        assert!(out.contains("audit chain intact"), "{out}");
        copies.push((path, done));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mid_run: Vec<_> = copies.iter().filter(|(_, d)| *d < ids.len()).collect();
    assert!(
        mid_run.len() >= 2,
        "only {} backups ran while requests were executing",
        mid_run.len()
    );

    // Each copy: owner-only, verifiable on its own, and no older than the one before it.
    let mut entries = 0;
    for (path, _) in &copies {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
        assert!(audit_verifies(&sqlite_url(path)), "{}", path.display());
        let n = audit_entries(path).await;
        assert!(n >= entries, "{} went back in time", path.display());
        entries = n;
    }
    // Nothing half-written is left beside them.
    let leftovers: Vec<_> = names_in(dir.path())
        .into_iter()
        .filter(|n| n.starts_with(".headroom-backup-") || n.ends_with("-journal"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Stopped, the database and its copy hold the same rows, table by table; the taking is
    // the source's newest audit entry.
    server.kill().unwrap();
    server.wait().unwrap();
    let still = dir.path().join("still.db");
    let (code, out, err) = backup(&db, still.as_os_str());
    assert_eq!(code, 0, "{out}{err}");
    let mut source = dump(&live).await;
    let copy = dump(&still).await;
    // The source gained one entry after the copy was taken: its own record of the backup.
    let log_of = |d: &mut Vec<(String, Vec<String>)>| {
        d.iter_mut()
            .find(|(t, _)| t == "audit_log")
            .map(|(_, rows)| std::mem::take(rows))
            .unwrap()
    };
    let source_log = log_of(&mut source);
    let mut copy_with_log = copy.clone();
    let copy_log = log_of(&mut copy_with_log);
    assert_eq!(source, copy_with_log, "every table but the audit log");
    assert_eq!(source_log.len(), copy_log.len() + 1);
    assert!(source_log.iter().any(
        |r| r.contains("'database.backed_up'") && r.contains(&format!("'{}'", still.display()))
    ));
    for row in &copy_log {
        assert!(source_log.contains(row), "{row}");
    }

    // A copy from the middle of the run, restored and started, finishes the work: the runner
    // finds every server the first life made through its label and creates none again.
    let (mid_copy, done_then) = mid_run[mid_run.len() / 2].clone();
    let restored = dir.path().join("restored.db");
    std::fs::copy(&mid_copy, &restored).unwrap();
    let restored_db = sqlite_url(&restored);
    let creates_before = fake.creates().len();
    let (mut server, log) = start(dir.path(), &restored_db, &fake, 1);
    wait_until_serving(&log).await;
    let restored_ctx = offline_ctx(&restored_db, &fake).await;
    let deadline = Instant::now() + Duration::from_secs(180);
    while finished(&restored_ctx, &ids).await < ids.len() {
        assert!(Instant::now() < deadline, "the restored run never finished");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.kill().unwrap();
    server.wait().unwrap();
    println!(
        "{} backups while serving ({} mid-run); the restored copy had {done_then}/{} requests \
         finished",
        copies.len(),
        mid_run.len(),
        ids.len()
    );
    assert_eq!(
        fake.creates().len(),
        creates_before,
        "no create after the restore"
    );
    for id in &ids {
        let d = requests::get(&restored_ctx, &Caller::system(), *id)
            .await
            .unwrap();
        assert_eq!(d.provision.state, ProvisionState::Succeeded, "request {id}");
        for m in &d.machines {
            let servers: Vec<_> = fake
                .servers()
                .into_iter()
                .filter(|s| s.name == m.name)
                .collect();
            assert_eq!(servers.len(), 1, "{}", m.name);
            assert_eq!(m.server_id, Some(servers[0].id), "{}", m.name);
        }
    }
    assert!(audit_verifies(&restored_db));
}

#[test]
fn a_backup_refuses_a_destination_it_would_overwrite_or_cannot_make() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(&dir.path().join("src.db"));
    migrate(&db);
    let taken = dir.path().join("taken.db");
    assert_eq!(backup(&db, taken.as_os_str()).0, 0);
    let link = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
    let long = dir.path().join("x".repeat(300));
    // A folder anyone may rename files in: another user could swap the copy mid-way.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let cases: Vec<(std::ffi::OsString, &str)> = vec![
        (taken.clone().into(), "file: already exists"),
        (dir.path().into(), "file: already exists"),
        (link.into(), "file: already exists"),
        (
            dir.path().join("missing/copy.db").into(),
            "file: its folder does not exist",
        ),
        // clap's own refusal, before headroom sees it.
        ("".into(), "a value is required for '<FILE>'"),
        ("/".into(), "file: must name a file"),
        (long.into(), "file: its name must be at most 255 bytes"),
        (
            dir.path().join("new/").into(),
            "file: must name a file, not a folder",
        ),
        (
            dir.path().join("a\nbackup ok.db").into(),
            "file: must not contain control characters",
        ),
        (
            dir.path().join("src.db-journal").into(),
            "file: must not end in -journal, -wal or -shm",
        ),
        (
            dir.path().join("copy.db-wal").into(),
            "file: must not end in -journal, -wal or -shm",
        ),
        (
            shared.join("copy.db").into(),
            "file: its folder can be changed by other users",
        ),
        (
            std::ffi::OsStr::from_bytes(b"/tmp/\xff\xfe.db").to_owned(),
            "file: must be valid UTF-8",
        ),
    ];
    for (file, expected) in cases {
        let (code, out, err) = backup(&db, &file);
        assert_eq!(code, 2, "{file:?}: {out}{err}");
        assert!(err.contains(expected), "{file:?}: {err}");
    }
    // The refused attempts changed nothing: the first copy is intact and nothing else appeared.
    let names: Vec<_> = names_in(dir.path())
        .into_iter()
        .filter(|n| !n.starts_with("src.db"))
        .collect();
    assert_eq!(names, ["dangling", "shared", "taken.db"]);
    assert!(names_in(&shared).is_empty());
    assert!(audit_verifies(&sqlite_url(&taken)));

    // With the sticky bit, others cannot rename what is not theirs: accepted (as /tmp is).
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let (code, out, err) = backup(&db, shared.join("copy.db").as_os_str());
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(names_in(&shared), ["copy.db"]);
}

#[tokio::test]
async fn a_database_whose_audit_chain_was_altered_gets_no_backup() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("src.db");
    let db = sqlite_url(&path);
    migrate(&db);
    let first = dir.path().join("first.db");
    // The first backup writes the first audit entry (its own record).
    assert_eq!(backup(&db, first.as_os_str()).0, 0);
    {
        // Someone with the file edits history behind the triggers' back.
        let mut conn = connect(&db).await;
        sqlx::query("DROP TRIGGER audit_log_no_update")
            .execute(&mut conn)
            .await
            .unwrap();
        let changed = sqlx::query("UPDATE audit_log SET details = '{}' WHERE id = 1")
            .execute(&mut conn)
            .await
            .unwrap();
        assert_eq!(changed.rows_affected(), 1);
    }
    let second = dir.path().join("second.db");
    let (code, out, err) = backup(&db, second.as_os_str());
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("the copy's audit chain is broken: audit entry 1"),
        "{err}"
    );
    assert!(!second.exists());
    let partial: Vec<_> = names_in(dir.path())
        .into_iter()
        .filter(|n| n.starts_with(".headroom-backup-"))
        .collect();
    assert!(partial.is_empty(), "{partial:?}");
}

#[tokio::test]
async fn a_backup_neither_creates_nor_migrates_its_source() {
    let dir = tempfile::tempdir().unwrap();
    // No database there: nothing is created, and the command says why it stopped.
    let missing = dir.path().join("missing.db");
    let (code, out, err) = backup(
        &sqlite_url(&missing),
        dir.path().join("copy.db").as_os_str(),
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("it must exist"), "{err}");
    assert_eq!(names_in(dir.path()), Vec::<String>::new());

    // A database one migration behind this binary (as before an upgrade) is copied as it is:
    // not migrated, and not written to (the record of the backup waits for its own binary).
    let path = dir.path().join("older.db");
    let db = sqlite_url(&path);
    migrate(&db);
    let latest = headroom::db::latest_migration();
    {
        let mut conn = connect(&db).await;
        sqlx::query("DELETE FROM _sqlx_migrations WHERE version = $1")
            .bind(latest)
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let before = dump(&path).await;
    let copy = dir.path().join("older-copy.db");
    let (code, out, err) = backup(&db, copy.as_os_str());
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "schema version {}, audit chain intact (0 entries)",
            latest - 1
        )),
        "{out}"
    );
    assert!(out.contains("not recorded in its audit log"), "{out}");
    assert_eq!(dump(&path).await, before, "the source was changed");
    assert_eq!(
        dump(&copy).await,
        before,
        "the copy differs from its source"
    );
}

#[tokio::test]
async fn a_database_with_a_dangling_reference_gets_no_backup() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(&dir.path().join("src.db"));
    migrate(&db);
    {
        let mut conn = connect(&db).await;
        sqlx::query("PRAGMA foreign_keys = OFF")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO api_tokens (user_id, label, token_hash, created_at, created_by)
             VALUES (999, 'orphan', 'h', 0, 'x')",
        )
        .execute(&mut conn)
        .await
        .unwrap();
    }
    let copy = dir.path().join("copy.db");
    let (code, out, err) = backup(&db, copy.as_os_str());
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("the copy is not sound: api_tokens row 1 refers to a missing users row"),
        "{err}"
    );
    assert!(!copy.exists());
    assert!(names_in(dir.path()).iter().all(|n| n.starts_with("src.db")));
}

#[tokio::test]
async fn a_backup_leaves_its_source_s_journal_mode_and_refuses_what_is_not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.db");
    migrate(&sqlite_url(&live));
    // A backup is in rollback-journal mode, as a restored copy is until headroom serves it.
    let restored = dir.path().join("restored.db");
    assert_eq!(backup(&sqlite_url(&live), restored.as_os_str()).0, 0);
    let header = |p: &Path| std::fs::read(p).unwrap()[18..20].to_vec();
    assert_eq!(header(&restored), [1, 1], "rollback mode");
    let again = dir.path().join("again.db");
    let (code, out, err) = backup(&sqlite_url(&restored), again.as_os_str());
    assert_eq!(code, 0, "{out}{err}");
    // Its own record went in through a rollback journal: the source is not in WAL mode now.
    assert_eq!(
        header(&restored),
        [1, 1],
        "the source's journal mode changed"
    );
    assert!(!dir.path().join("restored.db-wal").exists());

    // Not a database: refused, and left as it was.
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let text = dir.path().join("text.db");
    std::fs::write(&text, b"just some text, long enough to read a header from").unwrap();
    for (source, expected) in [(&empty, "too short"), (&text, "is not a SQLite database")] {
        let (code, out, err) = backup(&sqlite_url(source), dir.path().join("x.db").as_os_str());
        assert_eq!(code, 1, "{out}{err}");
        assert!(err.contains(expected), "{err}");
    }
    assert_eq!(std::fs::read(&empty).unwrap(), b"");
    assert!(!dir.path().join("x.db").exists());
}
