//! Password throttling that holds under concurrency, the password-change throttle and its
//! audit trail, and the process-wide bound on password hashing (503 + Retry-After).
//!
//! The bursts run against the real binary (the `Server` helper): the verification counter and
//! the peak RSS then belong to that one process, not to every test sharing this test binary.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use headroom::auth::tokens::{self, NewTokenInput};
use headroom::auth::users::{self, NewUserInput};
use headroom::auth::Caller;
use headroom::config::Settings;
use headroom::domain::Role;
use reqwest::{Response, StatusCode};

use crate::helpers::{cookie_value, input_value, texts, TestApp, PASSWORD};
use crate::secrets::Server;

const NEW_PASSWORD: &str = "a brand new passphrase";

// ---------------------------------------------------------------- in process (TestApp)

#[tokio::test]
async fn ten_wrong_current_passwords_are_throttled_with_429_and_each_is_audited() {
    let app = TestApp::spawn().await;
    app.create_user("alice", Role::Viewer).await;
    let s = app.login("alice", PASSWORD).await.unwrap();
    let threshold = Settings::default().throttle.account_failures as usize;

    let mut statuses = Vec::new();
    for i in 0..10 {
        let guess = format!("wrong guess number {i}");
        let res = app
            .post_form(
                "/account/password",
                &s,
                &[
                    ("current_password", &guess),
                    ("new_password", NEW_PASSWORD),
                    ("confirm_password", NEW_PASSWORD),
                ],
            )
            .await;
        let status = res.status();
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert!(retry_after(&res) >= 1, "429 carries Retry-After");
            let html = res.text().await.unwrap();
            assert!(
                texts(&html, "p.error-text")
                    .iter()
                    .any(|t| t.contains("too many wrong current passwords")),
                "{html}"
            );
        }
        statuses.push(status);
    }
    // The threshold-th wrong password engages the lock, so every later one is refused.
    assert_eq!(
        statuses[..threshold],
        vec![StatusCode::UNPROCESSABLE_ENTITY; threshold]
    );
    assert_eq!(
        statuses[threshold..],
        vec![StatusCode::TOO_MANY_REQUESTS; 10 - threshold]
    );

    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT actor, target_id, details FROM audit_log
         WHERE action = 'auth.password_change_failed' ORDER BY id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 10, "every failed attempt is audited");
    let reasons: Vec<String> = rows
        .iter()
        .map(|(actor, target, details)| {
            assert_eq!((actor.as_str(), target.as_str()), ("alice", "alice"));
            let d: serde_json::Value = serde_json::from_str(details).unwrap();
            d["reason"].as_str().unwrap().to_owned()
        })
        .collect();
    let mut expected = vec!["wrong current password"; threshold];
    expected.extend(vec!["throttled"; 10 - threshold]);
    assert_eq!(reasons, expected);
    let all_details: Vec<String> = sqlx::query_scalar("SELECT details FROM audit_log")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert!(
        all_details.iter().all(|d| !d.contains("wrong guess")),
        "no guess in the audit log"
    );

    // The right password is refused while the lock holds, and the form's guesses did not lock
    // sign-in (its key is separate).
    let change = [
        ("current_password", PASSWORD),
        ("new_password", NEW_PASSWORD),
        ("confirm_password", NEW_PASSWORD),
    ];
    let locked = app.post_form("/account/password", &s, &change).await;
    assert_eq!(locked.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        app.count("login_throttle WHERE key = 'user:alice'").await,
        0
    );
    app.clock.advance(Duration::from_secs(retry_after(&locked)));
    let res = app.post_form("/account/password", &s, &change).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER, "the lock is temporary");
    assert_eq!(
        app.count("login_throttle").await,
        0,
        "success clears the count"
    );
    assert!(app.login("alice", NEW_PASSWORD).await.is_ok());
}

#[tokio::test]
async fn signing_in_often_never_locks_your_own_address() {
    let app = TestApp::spawn_with(|s| s.throttle.address_failures = 3).await;
    app.create_user("alice", Role::Viewer).await;
    // Each attempt is counted before the check; a success takes its address count back.
    for i in 0..6 {
        assert!(app.login("alice", PASSWORD).await.is_ok(), "login {i}");
    }
    assert_eq!(app.count("login_throttle").await, 0);
    // Failures still count against the address.
    for i in 0..3 {
        let res = app
            .post_login(&format!("ghost{i}"), "wrong password 123")
            .await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    assert_eq!(
        app.post_login("alice", PASSWORD).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

// ---------------------------------------------------------------- the real binary

#[tokio::test]
async fn forty_parallel_wrong_passwords_verify_at_most_five_and_the_right_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = seed(dir.path(), &[("alice", Role::Viewer)]).await;
    let server = Server::start(dir.path(), &db, "serve").await;
    let reaper = Reaper(Some(server.pid()));
    let (http, base) = (client(), server.base.clone());
    let form = LoginForm::fetch(&http, &base).await;
    let before = metric(&http, &base, "headroom_password_verifications_total").await;

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..40 {
        let (http, base, form, tx) = (http.clone(), base.clone(), form.clone(), tx.clone());
        tokio::spawn(async move {
            let guess = format!("wrong guess number {i}");
            let res = form.post(&http, &base, "alice", &guess, None).await;
            let _ = tx.send(res.status());
        });
    }
    drop(tx);
    let mut statuses = Vec::new();
    let mut right = None;
    while let Some(status) = rx.recv().await {
        statuses.push(status);
        // As soon as the lock shows, while the other guesses are still being verified.
        if status == StatusCode::TOO_MANY_REQUESTS && right.is_none() {
            let res = form.post(&http, &base, "alice", PASSWORD, None).await;
            right = Some((res.status(), retry_after(&res)));
        }
    }
    let verified = metric(&http, &base, "headroom_password_verifications_total").await - before;
    let count = |s: StatusCode| statuses.iter().filter(|x| **x == s).count();
    eprintln!(
        "40 parallel wrong passwords: {verified} password verifications; {} × 401, {} × 429, {} × 503",
        count(StatusCode::UNAUTHORIZED),
        count(StatusCode::TOO_MANY_REQUESTS),
        count(StatusCode::SERVICE_UNAVAILABLE),
    );
    let threshold = u64::from(Settings::default().throttle.account_failures);
    assert!(verified <= threshold, "{verified} verifications");
    assert!(verified >= 1, "some guesses were really checked");
    assert_eq!(count(StatusCode::UNAUTHORIZED) as u64, verified);
    assert_eq!(
        count(StatusCode::UNAUTHORIZED)
            + count(StatusCode::TOO_MANY_REQUESTS)
            + count(StatusCode::SERVICE_UNAVAILABLE),
        40,
        "{statuses:?}"
    );
    let (status, wait) = right.expect("the burst engaged the lock");
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "right password refused"
    );
    assert!(wait >= 1);

    // The lock is temporary: once it lifts, the right password works.
    tokio::time::sleep(Duration::from_secs(wait) + Duration::from_millis(200)).await;
    let res = form.post(&http, &base, "alice", PASSWORD, None).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    reaper.stop(server).await;
}

#[tokio::test]
async fn two_hundred_parallel_logins_for_unknown_users_keep_peak_rss_under_256_mib() {
    let dir = tempfile::tempdir().unwrap();
    let db = seed(dir.path(), &[]).await;
    // Each request comes from its own client address (through a trusted proxy), so neither the
    // per-address nor the per-account lock stops them: only the hashing bound holds memory.
    let server = Server::start_with_env(
        dir.path(),
        &db,
        "serve",
        &[("HEADROOM_TRUSTED_PROXIES", "127.0.0.1")],
    )
    .await;
    let reaper = Reaper(Some(server.pid()));
    let (http, base) = (client(), server.base.clone());
    let form = LoginForm::fetch(&http, &base).await;
    let idle_kib = peak_rss_kib(server.pid());

    let burst = (0..200).map(|i| {
        let (http, base, form) = (http.clone(), base.clone(), form.clone());
        tokio::spawn(async move {
            // 198.18.0.0/15 is for benchmarks; it only ever appears in a header here.
            let client = format!("198.18.{}.{}", i / 250, i % 250 + 1);
            let name = format!("ghost{i}");
            form.post(&http, &base, &name, "wrong password 123", Some(&client))
                .await
                .status()
        })
    });
    let mut statuses = Vec::new();
    for task in burst.collect::<Vec<_>>() {
        statuses.push(task.await.unwrap());
    }
    let peak_kib = peak_rss_kib(server.pid());
    let verified = metric(&http, &base, "headroom_password_verifications_total").await;
    let count = |s: StatusCode| statuses.iter().filter(|x| **x == s).count();
    eprintln!(
        "200 parallel unknown-user logins: peak RSS (VmHWM) {:.1} MiB (before the burst {:.1} MiB); \
         {verified} verifications; {} × 401, {} × 503",
        peak_kib as f64 / 1024.0,
        idle_kib as f64 / 1024.0,
        count(StatusCode::UNAUTHORIZED),
        count(StatusCode::SERVICE_UNAVAILABLE),
    );
    assert!(peak_kib < 256 * 1024, "peak RSS {peak_kib} KiB");
    // The memory figure means something only if hashing really ran, several at once: at least
    // ten verifications (the bound is one per core, up to four, each many milliseconds).
    assert!(
        verified >= 10,
        "only {verified} verifications: the burst did not exercise the hashing bound"
    );
    assert_eq!(count(StatusCode::UNAUTHORIZED) as u64, verified);
    assert_eq!(
        count(StatusCode::UNAUTHORIZED) + count(StatusCode::SERVICE_UNAVAILABLE),
        200,
        "{statuses:?}"
    );
    reaper.stop(server).await;
}

#[tokio::test]
async fn a_full_hashing_bound_answers_503_with_retry_after_on_pages_and_api() {
    let dir = tempfile::tempdir().unwrap();
    let db = seed(dir.path(), &[("root", Role::Admin), ("slow", Role::Viewer)]).await;
    let token = slow_down(&db, "slow", Duration::from_secs(8)).await;
    let server = Server::start_with_env(
        dir.path(),
        &db,
        "serve",
        &[("HEADROOM_PASSWORD_HASH_CONCURRENCY", "1")],
    )
    .await;
    let reaper = Reaper(Some(server.pid()));
    let (http, base) = (client(), server.base.clone());
    assert_eq!(
        metric(&http, &base, "headroom_password_hashing_bound").await,
        1
    );
    let form = LoginForm::fetch(&http, &base).await;
    let root = form.post(&http, &base, "root", PASSWORD, None).await;
    assert_eq!(root.status(), StatusCode::SEE_OTHER);
    let session = cookie_value(root.headers(), "headroom_session").unwrap();
    let cookie = format!("headroom_session={session}");
    let csrf = headroom::auth::csrf::for_session(&session);

    // A login whose stored hash takes seconds to check holds the only permit.
    let slow = {
        let (http, base, form) = (http.clone(), base.clone(), form.clone());
        tokio::spawn(async move {
            form.post(&http, &base, "slow", "wrong password 123", None)
                .await
                .status()
        })
    };
    let started = Instant::now();
    while metric(&http, &base, "headroom_password_verifications_total").await < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "slow check never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let login = form.post(&http, &base, "nobody", "wrong password 123", None);
    let api = http
        .post(format!("{base}/api/v1/users"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"username": "carol", "role": "viewer", "password": NEW_PASSWORD}))
        .send();
    let change = http
        .post(format!("{base}/account/password"))
        .header("Cookie", &cookie)
        .form(&[
            ("current_password", PASSWORD),
            ("new_password", NEW_PASSWORD),
            ("confirm_password", NEW_PASSWORD),
            ("csrf_token", &csrf),
        ])
        .send();
    let (login, api, change) = tokio::join!(login, api, change);
    let (api, change) = (api.unwrap(), change.unwrap());
    assert!(!slow.is_finished(), "the slow check still holds the permit");

    assert_eq!(login.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(retry_after(&login) >= 1);
    let html = login.text().await.unwrap();
    assert!(
        texts(&html, "p.error-text")
            .iter()
            .any(|t| t.contains("busy checking other passwords")),
        "{html}"
    );

    assert_eq!(api.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(retry_after(&api) >= 1);
    assert_eq!(
        api.headers()["content-type"].to_str().unwrap(),
        "application/problem+json"
    );
    let problem: serde_json::Value = api.json().await.unwrap();
    assert_eq!(problem["status"], 503);

    assert_eq!(change.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(retry_after(&change) >= 1);

    // Nothing was counted against anyone for the checks that never ran.
    let pool = headroom::db::connect(&db).await.unwrap();
    let keys: Vec<(String, i64)> =
        sqlx::query_as("SELECT key, failures FROM login_throttle ORDER BY key")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        keys,
        vec![
            ("addr:127.0.0.1".to_owned(), 1),
            ("user:slow".to_owned(), 1)
        ],
        "only the slow guess counts"
    );
    assert!(metric(&http, &base, "headroom_password_busy_total").await >= 3);

    // Once the permit frees, everything works again.
    assert_eq!(slow.await.unwrap(), StatusCode::UNAUTHORIZED);
    let res = form.post(&http, &base, "root", PASSWORD, None).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    reaper.stop(server).await;
}

// ---------------------------------------------------------------- helpers

/// Kills the server if a test fails before stopping it (a leaked server would outlive the run).
struct Reaper(Option<u32>);

impl Reaper {
    /// Stops the server normally; the reaper is disarmed first, so it never signals a reaped
    /// (and possibly reused) process id.
    async fn stop(mut self, server: Server) {
        self.0 = None;
        let (status, _) = server.stop().await;
        assert!(status.success(), "graceful shutdown exits 0, got {status}");
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// A migrated database file with the given users (password [`PASSWORD`]); its URL.
async fn seed(dir: &Path, users: &[(&str, Role)]) -> String {
    let db = format!("sqlite:{}", dir.join("h.db").display());
    let pool = headroom::db::connect(&db).await.unwrap();
    for (name, role) in users {
        let input = NewUserInput {
            username: (*name).into(),
            role: role.to_string(),
            password: PASSWORD.into(),
        };
        users::create_user(
            &crate::helpers::ctx_for(pool.clone()),
            &Caller::system(),
            &input,
        )
        .await
        .unwrap();
    }
    pool.close().await;
    db
}

/// Gives `username` a stored hash whose check takes about `target` (more argon2 passes, the
/// same memory), and returns an API token of `root`. The stored output is made up: no password
/// matches it, and checking one still costs every pass.
async fn slow_down(db: &str, username: &str, target: Duration) -> String {
    use argon2::password_hash::{PasswordHasher, SaltString};
    let per_pass = tokio::task::spawn_blocking(|| {
        let salt = SaltString::encode_b64(b"sixteen byte slt").unwrap();
        let params = argon2::Params::new(19_456, 10, 1, None).unwrap();
        let argon =
            argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
        // Ten passes so the one-off allocation hardly counts, and the fastest of two runs: other
        // tests load the machine now and then, and an overestimate here would make the check
        // too short to hold the permit.
        (0..2)
            .map(|_| {
                let started = Instant::now();
                argon.hash_password(b"timing only", &salt).unwrap();
                started.elapsed() / 10
            })
            .min()
            .unwrap()
    })
    .await
    .unwrap();
    let passes = (target.as_secs_f64() / per_pass.as_secs_f64()).ceil() as u32;
    let phc = format!(
        "$argon2id$v=19$m=19456,t={},p=1$c2l4dGVlbiBieXRlIHNsdA${}",
        passes.clamp(40, 1_000_000),
        "A".repeat(43)
    );
    let pool = headroom::db::connect(db).await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let user = headroom::db::users::by_name(&mut conn, username)
        .await
        .unwrap()
        .unwrap();
    headroom::db::users::set_password_hash(&mut conn, user.id, &phc, 0)
        .await
        .unwrap();
    drop(conn);
    let input = NewTokenInput {
        username: "root".into(),
        label: "throttle test".into(),
    };
    let (token, _) = tokens::create_token(
        &crate::helpers::ctx_for(pool.clone()),
        &Caller::system(),
        &input,
    )
    .await
    .unwrap();
    pool.close().await;
    token
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// One pre-login CSRF cookie and its form token, reused by every attempt of a burst.
#[derive(Clone)]
struct LoginForm {
    cookie: String,
    token: String,
}

impl LoginForm {
    async fn fetch(http: &reqwest::Client, base: &str) -> Self {
        let res = http.get(format!("{base}/login")).send().await.unwrap();
        let cookie = cookie_value(res.headers(), "headroom_login_csrf").unwrap();
        let token = input_value(&res.text().await.unwrap(), "csrf_token").unwrap();
        Self {
            cookie: format!("headroom_login_csrf={cookie}"),
            token,
        }
    }

    async fn post(
        &self,
        http: &reqwest::Client,
        base: &str,
        username: &str,
        password: &str,
        forwarded_for: Option<&str>,
    ) -> Response {
        let mut req = http
            .post(format!("{base}/login"))
            .header("Cookie", &self.cookie);
        if let Some(addr) = forwarded_for {
            req = req.header("X-Forwarded-For", addr);
        }
        req.form(&[
            ("username", username),
            ("password", password),
            ("csrf_token", &self.token),
        ])
        .send()
        .await
        .unwrap()
    }
}

/// A sample of an unlabelled series from `/metrics`.
async fn metric(http: &reqwest::Client, base: &str, name: &str) -> u64 {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{name} missing from /metrics"))
        .trim()
        .parse()
        .unwrap()
}

/// The process's peak resident set (VmHWM), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

fn retry_after(res: &Response) -> u64 {
    res.headers()
        .get("retry-after")
        .expect("Retry-After header")
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}
