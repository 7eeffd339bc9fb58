//! The command line: migrate, users, tokens.

use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

fn run(db: &str, args: &[&str], stdin: &str) -> (i32, String, String) {
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
    assert!(!out.status.success(), "--password-stdin is required");
}
