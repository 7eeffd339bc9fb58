//! The command line: migrate, users, tokens.

use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

/// `headroom --database-url DB ARGS…` with `stdin`: its exit code, stdout and stderr.
pub(crate) fn run(db: &str, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(BIN)
        .arg("--database-url")
        .arg(db)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn users_are_managed_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("cli.db").display());
    assert_eq!(run(&db, &["migrate"], "").0, 0);
    let (code, out, err) = run(
        &db,
        &[
            "user",
            "add",
            "alice",
            "--role",
            "admin",
            "--password-stdin",
        ],
        "a long enough password\n",
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("created alice (admin)"));
    assert_eq!(
        run(
            &db,
            &["user", "add", "bob", "--role", "viewer", "--password-stdin"],
            "another long password\n"
        )
        .0,
        0
    );
    let (_, list, _) = run(&db, &["user", "list"], "");
    assert!(
        list.lines()
            .any(|l| l.starts_with("alice") && l.contains("admin") && l.contains("active")),
        "{list}"
    );
    assert_eq!(run(&db, &["user", "set-role", "bob", "approver"], "").0, 0);
    assert_eq!(run(&db, &["user", "disable", "bob"], "").0, 0);
    let (_, list, _) = run(&db, &["user", "list"], "");
    assert!(
        list.lines()
            .any(|l| l.starts_with("bob") && l.contains("approver") && l.contains("disabled")),
        "{list}"
    );

    // Rules hold on the command line too, with the field named and exit code 2.
    let (code, _, err) = run(
        &db,
        &["user", "add", "carol", "--role", "root", "--password-stdin"],
        "a long enough password\n",
    );
    assert_eq!(code, 2);
    assert!(err.contains("role: must be one of"), "{err}");
    let (code, _, err) = run(
        &db,
        &[
            "user",
            "add",
            "carol",
            "--role",
            "viewer",
            "--password-stdin",
        ],
        "short\n",
    );
    assert_eq!(code, 2);
    assert!(err.contains("password: must be at least 12"), "{err}");
    let (code, _, err) = run(&db, &["user", "set-role", "alice", "viewer"], "");
    assert_eq!(code, 2, "the last admin stays: {err}");
    assert!(err.contains("last active admin"));
    let (code, _, err) = run(&db, &["user", "disable", "nobody"], "");
    assert_eq!(code, 1);
    assert!(err.contains("user nobody not found"), "{err}");

    let (code, out, _) = run(&db, &["token", "create", "alice", "--label", "ci"], "");
    assert_eq!(code, 0);
    assert!(out.trim().starts_with("hr_") && out.trim().len() == 67);
    let (code, out, _) = run(&db, &["audit", "verify"], "");
    assert_eq!(code, 0);
    assert!(out.contains("intact"));
}

#[test]
fn the_password_is_never_taken_from_the_command_line() {
    let out = Command::new(BIN)
        .args(["user", "add", "x", "--role", "viewer"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--password-stdin is required");
    // clap's usage error names the missing flag, and no password flag exists to misuse.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the following required arguments were not provided")
            && err.contains("--password-stdin"),
        "{err}"
    );
}

/// Runs `headroom ARGS` with exactly `env` (nothing inherited, so the machine's own
/// `HEADROOM_*` variables cannot leak in).
fn run_with_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn settings_prints_each_effective_value_with_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("headroom.toml");
    std::fs::write(&file, "render_timeout_ms = 350\nworkers = 3\n").unwrap();
    let db = dir.path().join("never-created.db");
    let db_url = format!("sqlite:{}", db.display());
    let (code, out, err) = run_with_env(
        &[
            "--config",
            file.to_str().unwrap(),
            "--database-url",
            &db_url,
            "settings",
        ],
        &[
            ("HEADROOM_WORKERS", "5"),
            ("HEADROOM_TRUSTED_PROXIES", "10.0.0.2, 10.0.0.3"),
            ("HETZNER_API_TOKEN", "tok-that-must-not-print"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let row = |key: &str| -> (String, String) {
        let r = rows
            .iter()
            .find(|r| r[0] == key)
            .unwrap_or_else(|| panic!("{key} missing from:\n{out}"));
        (r[1].to_owned(), r[2..].join(" "))
    };
    let expect = |key: &str, source: &str, value: &str| {
        assert_eq!(
            row(key),
            (source.to_owned(), value.to_owned()),
            "{key}:\n{out}"
        );
    };
    expect("render_timeout_ms", "file", "350");
    // The variable beats the file.
    expect("workers", "env", "5");
    expect("trusted_proxies", "env", "10.0.0.2,10.0.0.3");
    expect("database_url", "flag", &db_url);
    expect("bind", "default", "127.0.0.1:8080");
    expect("log_format", "default", "text");
    expect("hetzner_api_token", "env", "set");
    assert!(!out.contains("tok-that-must-not-print"), "{out}");
    assert_eq!(
        rows.len(),
        headroom::config::KEYS.len() + headroom::config::SECRETS.len(),
        "{out}"
    );
    assert!(!db.exists(), "printing settings opened the database");

    // The same loader refuses what serve would refuse, naming the key and its source.
    let (code, _, err) = run_with_env(&["settings"], &[("HEADROOM_SESSION_IDLE_MINUTES", "0")]);
    assert_eq!(code, 1);
    assert!(
        err.contains(
            "session_idle_minutes must be between 1 and 43200 (minutes), not 0 \
             (set by environment variable HEADROOM_SESSION_IDLE_MINUTES)"
        ),
        "{err}"
    );
    let (_, out, _) = run_with_env(&["settings"], &[]);
    assert!(
        out.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
            == ["hetzner_api_token", "default", "unset"]),
        "{out}"
    );
}

/// The systemd unit the operating guide ships sets only settings that exist, each to a value
/// their rules accept, and the token reaches headroom through the credential file.
#[test]
fn the_shipped_systemd_unit_configures_settings_headroom_accepts() {
    let unit = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/headroom.service"),
    )
    .unwrap();
    // The credential the unit loads, under the name it gives it.
    let credential = unit
        .lines()
        .find_map(|l| l.strip_prefix("LoadCredential="))
        .and_then(|c| c.split_once(':'))
        .map(|(name, _)| name.to_owned())
        .expect("LoadCredential=NAME:PATH");
    let credentials = tempfile::tempdir().unwrap();
    std::fs::write(credentials.path().join(&credential), "tok-from-credential").unwrap();
    let env: Vec<(String, String)> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("Environment="))
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("KEY=value");
            // `%d` is systemd's credentials folder.
            let v = v.replace("%d", credentials.path().to_str().unwrap());
            (k.to_owned(), v)
        })
        .collect();
    assert!(env.len() >= 5, "{env:?}");
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (code, out, err) = run_with_env(&["settings"], &pairs);
    assert_eq!(code, 0, "{err}");
    for (key, _) in &env {
        let setting = key
            .strip_prefix("HEADROOM_")
            .map(str::to_ascii_lowercase)
            .unwrap_or_else(|| "hetzner_api_token".to_owned());
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(setting.as_str()))
            .unwrap_or_else(|| panic!("{key}: no setting {setting} in\n{out}"));
        assert_eq!(line.split_whitespace().nth(1), Some("env"), "{line}");
    }
    let token_line = out
        .lines()
        .find(|l| l.starts_with("hetzner_api_token"))
        .unwrap();
    assert!(
        token_line.ends_with(" set"),
        "the credential was not read: {token_line}"
    );
    assert!(!out.contains("tok-from-credential"), "{out}");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap();
    assert!(exec.ends_with("headroom serve"), "{exec}");
}

#[test]
fn a_setting_variable_that_is_not_utf8_is_named_instead_of_replaced_by_the_default() {
    use std::os::unix::ffi::OsStringExt;
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .current_dir(dir.path())
        .arg("settings")
        .env(
            "HEADROOM_DATABASE_URL",
            std::ffi::OsString::from_vec(b"sqlite:\xff.db".to_vec()),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("HEADROOM_DATABASE_URL") && err.contains("not valid UTF-8"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_printed_error_carries_no_control_or_reordering_characters() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("h.toml");
    // A key name is echoed in the refusal; this one carries a screen clear, a forged line and
    // a right-to-left override.
    std::fs::write(&file, "\"k\\u001b[2J\\nerror: FORGED\\u202e\" = 1\n").unwrap();
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&file)
        .arg("settings")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    let line = err.strip_suffix('\n').expect("one line");
    assert!(line.contains("unknown key"), "{err:?}");
    assert!(
        !line.chars().any(|c| c.is_control() || c == '\u{202e}'),
        "{err:?}"
    );
}
