//! The soak: the release binary serving ten minutes of mixed load while 100 fleets are
//! scraped, watched from outside for anything that grows.
//!
//! Everything runs on loopback. This process starts 100 simulated yubaba fleets (three in
//! four publish the native `headroom` section, the rest are derived from `/node`; none gains
//! a tenant, so all stay healthy) and the wiremock Hetzner fake of the tests
//! (`tests/api/fake_hetzner.rs`), then a copy of the headroom binary as its own process:
//! `headroom serve` over a fresh SQLite file, scraping on, the Hetzner client pointed at the
//! fake (`HEADROOM_HETZNER_API_URL`). Users and their API tokens are made with the binary's
//! own `user add` and `token create`; the catalogue, the machine config and the 100 fleets
//! (scraped every 5 s) through the JSON API. The server is then stopped while each fleet gets
//! its last `HEADROOM_SOAK_HISTORY_HOURS` of samples (default 48, the raw retention, plus one
//! prune interval that the prune at start removes: samples every 5 s up to now and the
//! rollups of those hours, as the product stores them; 0 starts empty) and started again
//! (its log appended to; the scrape figures are the second process's), so the charts' hour
//! and SQLite's caches are full before the first minute
//! rather than growing with the run. Then, for `HEADROOM_SOAK_SECONDS` (default 600):
//!
//! - `HEADROOM_SOAK_CLIENTS` clients (default 4), each pausing `HEADROOM_SOAK_PAUSE_MS`
//!   (default 20) between requests and each with its own viewer and operator (signed in
//!   through the login form, and an API token each), cycle through pages (dashboard, fleet page, provision
//!   history, audit), htmx partials (`/dashboard/cards`, a fleet's chart, live chart and
//!   "now", the approvals badge), API reads (fleets, a fleet, its headroom series, provisions,
//!   audit), renders (`POST /api/v1/render`) and template previews (`POST /preview`), the
//!   audit and provision exports (CSV and JSONL, pages and API; two at a time across the
//!   clients, as many as the server runs at once) and `/metrics`;
//! - once a minute an operator files a one-machine request, an approver (another person:
//!   four eyes) approves it, and it is followed until the runner has created the server at
//!   the fake;
//! - every 10 s the server's resident memory (and its file-backed part), open file
//!   descriptors, threads, render workers, the database's `-wal` size and that interval's
//!   requests, errors, p50 and p99 are printed.
//!
//! Goals: no error (a request answered other than expected, a provision that did not
//! succeed, a failed scrape, an `ERROR` line in the server's log); resident memory and open
//! files after the first minute within 10 % of their value at one minute; the WAL bounded
//! (its largest size in the run's second half at most 10 % above its largest in the first:
//! it is checkpointed and reused, not growing); p99 of the last minute within 1.5× of the
//! second minute's. Also: the audit chain verifies afterwards. Exits 1 when a goal is missed.
//!
//! `scripts/soak.sh` (which runs `cargo bench --bench soak`); not part of CI. The binary is
//! the one cargo built for the bench (release), or `HEADROOM_SOAK_BIN`.

#[path = "../tests/api/fake_hetzner.rs"]
mod fake_hetzner;
#[path = "support/goals.rs"]
mod goals;
#[path = "../tests/api/series_history.rs"]
mod history;
#[path = "support/proc_probe.rs"]
mod proc_probe;
#[path = "support/soak_log.rs"]
mod soak_log;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom::sim::yubaba::{SimFleet, SimFleetOptions};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use proc_probe::Probe;
use soak_log::{ms, summarise, Entry, RequestLog};

const FLEETS: usize = 100;
const PASSWORD: &str = "soak-correct-horse-battery-staple";
const CONFIG: &str = "spare-fsn1";
const SAMPLE_EVERY: Duration = Duration::from_secs(10);
const PROVISION_EVERY: Duration = Duration::from_secs(60);
/// The first request is filed this long into the load, the next a minute later, and so on.
const FIRST_PROVISION_AFTER: Duration = Duration::from_secs(20);
/// How long a provision may take from approval to its servers running.
const PROVISION_DEADLINE: Duration = Duration::from_secs(45);
/// The accounts besides each client's own: who sets up, who files the provisions and who
/// approves them (another person: four eyes).
const USERS: [(&str, &str); 3] = [
    ("admin", "admin"),
    ("olga", "operator"),
    ("abe", "approver"),
];
/// Exports the server runs at once (`context::MAX_EXPORTS`; a third is told to retry): the
/// clients share as many permits, so a 429 means a permit the server never gave back.
const EXPORTS_AT_ONCE: usize = 2;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How long and how hard the soak runs.
struct Knobs {
    seconds: u64,
    clients: usize,
    pause: Duration,
    scrape_secs: u32,
    history_hours: i64,
}

impl Knobs {
    fn from_env() -> Self {
        Self {
            seconds: env_or("HEADROOM_SOAK_SECONDS", 600),
            clients: env_or("HEADROOM_SOAK_CLIENTS", 4).max(1),
            pause: Duration::from_millis(env_or("HEADROOM_SOAK_PAUSE_MS", 20)),
            scrape_secs: 5,
            history_hours: env_or("HEADROOM_SOAK_HISTORY_HOURS", 48),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The server process

/// The headroom process under soak, killed when dropped.
struct Server {
    child: tokio::process::Child,
    pid: u32,
    base: String,
    bin: PathBuf,
    env: Vec<(String, String)>,
    db: PathBuf,
    log: PathBuf,
}

/// The variables every headroom command of the soak runs with, and no others: a developer's
/// own `HEADROOM_*` settings must not leak into the run.
fn server_env(dir: &Path, port: u16, fake: &fake_hetzner::FakeHetzner) -> Vec<(String, String)> {
    [
        (
            "HEADROOM_DATABASE_URL",
            format!("sqlite:{}", dir.join("soak.db").display()),
        ),
        ("HEADROOM_BIND", format!("127.0.0.1:{port}")),
        ("HEADROOM_HETZNER_API_URL", fake.uri()),
        ("HETZNER_API_TOKEN", fake.token()),
        ("HEADROOM_SCRAPE_ENABLED", "true".into()),
        ("HEADROOM_LOG_FORMAT", "json".into()),
        // The fake's servers never boot a yubaba: a request ends when they run.
        ("HEADROOM_FOLLOW_JOINS", "false".into()),
        // The config's tarball is pinned at an address nobody serves.
        ("HEADROOM_PIN_CHECK_ON_REQUEST", "false".into()),
        ("HEADROOM_PLAN_CHECKS_BLOCKING", String::new()),
        ("HEADROOM_RUNNER_ACTION_POLL_MS", "200".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// Runs `headroom ARGS` with the soak's variables, `stdin` on its standard input; its stdout.
async fn cli(bin: &Path, env: &[(String, String)], args: &[&str], stdin: &str) -> String {
    let mut child = tokio::process::Command::new(bin)
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("headroom command starts");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).await.expect("stdin");
    drop(input);
    let out = child.wait_with_output().await.expect("headroom command");
    assert!(
        out.status.success(),
        "headroom {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// `path` opened for appending, created if missing.
fn append(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

impl Server {
    /// Starts `headroom serve` and waits until `/readyz` answers.
    async fn start(bin: &Path, dir: &Path, env: Vec<(String, String)>) -> Server {
        let bind = &env
            .iter()
            .find(|(k, _)| k == "HEADROOM_BIND")
            .expect("bind")
            .1;
        let base = format!("http://{bind}");
        let log = dir.join("server.log");
        let child = tokio::process::Command::new(bin)
            .arg("serve")
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            // Appended to: a restart (after the history is written) keeps the first
            // process's lines, which the log goal checks too.
            .stdout(append(&dir.join("server.out")))
            .stderr(append(&log))
            .kill_on_drop(true)
            .spawn()
            .expect("headroom serve starts");
        let pid = child.id().expect("pid");
        let server = Server {
            child,
            pid,
            base,
            bin: bin.to_owned(),
            env,
            db: dir.join("soak.db"),
            log,
        };
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = client
                .get(format!("{}/readyz", server.base))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200);
            if ready {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "headroom serve not ready after 30 s; see {}",
                server.log.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn probe(&self) -> Option<Probe> {
        proc_probe::probe(self.pid, &self.db)
    }

    /// Whether the process has ended (and how).
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM, then up to 15 s for a clean stop; killed after that.
    async fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let _ = tokio::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .await;
        match tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                let _ = self.child.kill().await;
                None
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// HTTP as the soak's clients speak it

/// A signed-in browser: the session cookie and the CSRF token its pages carry.
#[derive(Clone)]
struct Session {
    cookie: String,
    csrf: String,
}

/// `name=value` of the `Set-Cookie` for `name`.
fn set_cookie(res: &reqwest::Response, name: &str) -> Option<String> {
    res.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap_or(v).to_owned())
}

/// The value of the `csrf_token` input in a page.
fn csrf_input(html: &str) -> Option<String> {
    let at = html.find("name=\"csrf_token\"")?;
    let tag_start = html[..at].rfind('<')?;
    let tag = &html[tag_start..tag_start + html[tag_start..].find('>')?];
    let value = tag.split("value=\"").nth(1)?;
    Some(value[..value.find('"')?].to_owned())
}

/// A client that never follows redirects (a login's 303 carries the cookie).
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client")
}

/// Signs `user` in through the login form, as a browser does.
async fn login(http: &reqwest::Client, base: &str, user: &str) -> Session {
    let form = http
        .get(format!("{base}/login"))
        .send()
        .await
        .expect("login page");
    let pre = set_cookie(&form, "headroom_login_csrf").expect("login csrf cookie");
    let token = csrf_input(&form.text().await.expect("login html")).expect("login csrf token");
    let res = http
        .post(format!("{base}/login"))
        .header("Cookie", pre)
        .form(&[
            ("username", user),
            ("password", PASSWORD),
            ("csrf_token", &token),
        ])
        .send()
        .await
        .expect("login");
    assert_eq!(res.status(), 303, "{user} signs in");
    let cookie = set_cookie(&res, "headroom_session").expect("session cookie");
    let page = http
        .get(format!("{base}/account"))
        .header("Cookie", &cookie)
        .send()
        .await
        .expect("account page");
    let csrf = csrf_input(&page.text().await.expect("account html")).expect("csrf token");
    Session { cookie, csrf }
}

/// One set-up call to `/api/v1` + `path` as `token`; panics unless it answers `expect`.
async fn setup_call(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    path: &str,
    body: Option<Value>,
    expect: u16,
) -> Value {
    let req = match body {
        Some(b) => http.post(format!("{base}/api/v1{path}")).json(&b),
        None => http.get(format!("{base}/api/v1{path}")),
    };
    let res = req.bearer_auth(token).send().await.expect(path);
    let status = res.status().as_u16();
    let text = res.text().await.unwrap_or_default();
    assert_eq!(status, expect, "{path}: {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// One client's people, as several people at their browsers and scripts would be: a viewer
/// reading (session and token) and an operator rendering (session and token). Renders are
/// limited per requester, so each client has its own.
struct Identity {
    viewer: Session,
    viewer_token: String,
    operator: Session,
    operator_token: String,
}

/// The soak's view of the server: who calls, the fleets, and the record.
struct Load {
    base: String,
    tokens: HashMap<String, String>,
    clients: Vec<Identity>,
    exports: tokio::sync::Semaphore,
    fleets: Vec<String>,
    template_body: String,
    log: RequestLog,
}

impl Load {
    fn token(&self, user: &str) -> &str {
        &self.tokens[user]
    }

    /// Sends `req`, reads the whole answer and records it as `kind`: ok when the status is
    /// `expect` and, if given, the body contains `must_contain`. Returns the body when ok.
    async fn call(
        &self,
        kind: &'static str,
        req: reqwest::RequestBuilder,
        expect: u16,
        must_contain: Option<&str>,
    ) -> Option<String> {
        let start = Instant::now();
        let answer = match req.send().await {
            Ok(res) => {
                let status = res.status().as_u16();
                res.text().await.map(|body| (status, body))
            }
            Err(e) => Err(e),
        };
        let took = start.elapsed();
        match answer {
            Ok((status, body))
                if status == expect && must_contain.is_none_or(|m| body.contains(m)) =>
            {
                self.log.record(kind, took, true);
                Some(body)
            }
            Ok((status, body)) => {
                self.log.record(kind, took, false);
                let head: String = body.chars().take(300).collect();
                self.log
                    .note_failure(format!("{kind}: {status} (expected {expect}): {head}"));
                None
            }
            Err(e) => {
                self.log.record(kind, took, false);
                self.log.note_failure(format!("{kind}: {e}"));
                None
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The mix

/// One kind of request a client makes.
#[derive(Debug, Clone, Copy)]
enum Op {
    Dashboard,
    Cards,
    FleetPage,
    Chart,
    ChartLive,
    FleetNow,
    Badge,
    ProvisionsPage,
    AuditPage,
    ApiFleets,
    ApiFleet,
    ApiHeadroom,
    ApiProvisions,
    ApiAudit,
    Render,
    Preview,
    AuditExport,
    ProvisionsExport,
    ApiAuditExport,
    ApiProvisionsExport,
    Metrics,
}

/// One client's cycle: the polled partials and reads most often, the heavy requests
/// (renders, exports) once or twice a cycle.
const MIX: &[Op] = &[
    Op::Dashboard,
    Op::Cards,
    Op::FleetPage,
    Op::ApiFleet,
    Op::Chart,
    Op::Cards,
    Op::ApiHeadroom,
    Op::ChartLive,
    Op::FleetNow,
    Op::ApiFleets,
    Op::Badge,
    Op::Render,
    Op::Cards,
    Op::ProvisionsPage,
    Op::ApiProvisions,
    Op::Preview,
    Op::FleetNow,
    Op::AuditPage,
    Op::ApiAudit,
    Op::Cards,
    Op::ChartLive,
    Op::AuditExport,
    Op::ProvisionsExport,
    Op::ApiAuditExport,
    Op::ApiProvisionsExport,
    Op::Metrics,
];

impl Op {
    fn kind(self) -> &'static str {
        match self {
            Op::Dashboard => "page /",
            Op::Cards => "htmx cards",
            Op::FleetPage => "page fleet",
            Op::Chart => "htmx chart",
            Op::ChartLive => "htmx chart live",
            Op::FleetNow => "htmx fleet now",
            Op::Badge => "htmx badge",
            Op::ProvisionsPage => "page provisions",
            Op::AuditPage => "page audit",
            Op::ApiFleets => "api fleets",
            Op::ApiFleet => "api fleet",
            Op::ApiHeadroom => "api headroom",
            Op::ApiProvisions => "api provisions",
            Op::ApiAudit => "api audit",
            Op::Render => "api render",
            Op::Preview => "htmx preview",
            Op::AuditExport => "export audit csv",
            Op::ProvisionsExport => "export provisions csv",
            Op::ApiAuditExport => "api audit jsonl",
            Op::ApiProvisionsExport => "api provisions jsonl",
            Op::Metrics => "metrics",
        }
    }
}

impl Op {
    fn is_export(self) -> bool {
        matches!(
            self,
            Op::AuditExport | Op::ProvisionsExport | Op::ApiAuditExport | Op::ApiProvisionsExport
        )
    }
}

async fn run_op(load: &Load, who: &Identity, http: &reqwest::Client, op: Op, fleet: &str) {
    let base = &load.base;
    let page = |path: String| {
        http.get(format!("{base}{path}"))
            .header("Cookie", &who.viewer.cookie)
    };
    let htmx = |path: String| page(path).header("HX-Request", "true");
    let api = |path: String| {
        http.get(format!("{base}/api/v1{path}"))
            .bearer_auth(&who.viewer_token)
    };
    let kind = op.kind();
    let (req, contains) = match op {
        Op::Dashboard => (page("/".into()), Some("</html>")),
        Op::Cards => (htmx("/dashboard/cards".into()), None),
        Op::FleetPage => (page(format!("/fleets/{fleet}")), Some("</html>")),
        Op::Chart => (htmx(format!("/fleets/{fleet}/chart?range=1h")), None),
        Op::ChartLive => (htmx(format!("/fleets/{fleet}/chart/live?range=1h")), None),
        Op::FleetNow => (htmx(format!("/fleets/{fleet}/now")), None),
        Op::Badge => (htmx("/approvals/badge".into()), None),
        Op::ProvisionsPage => (page("/provisions".into()), Some("</html>")),
        Op::AuditPage => (page("/audit".into()), Some("</html>")),
        Op::ApiFleets => (api("/fleets".into()), Some("\"items\"")),
        Op::ApiFleet => (api(format!("/fleets/{fleet}")), Some("\"status\"")),
        Op::ApiHeadroom => (api(format!("/fleets/{fleet}/headroom")), Some("\"points\"")),
        Op::ApiProvisions => (api("/provisions".into()), Some("\"items\"")),
        Op::ApiAudit => (api("/audit?limit=50".into()), Some("\"items\"")),
        Op::Render => (
            http.post(format!("{base}/api/v1/render"))
                .bearer_auth(&who.operator_token)
                .json(&json!({"machine_config": CONFIG})),
            Some("\"ok\":true"),
        ),
        Op::Preview => (
            http.post(format!("{base}/preview"))
                .header("Cookie", &who.operator.cookie)
                .header("X-CSRF-Token", &who.operator.csrf)
                .header("HX-Request", "true")
                .form(&[("config", CONFIG), ("body", &load.template_body)]),
            None,
        ),
        Op::AuditExport => (page("/audit/export?format=csv".into()), None),
        Op::ProvisionsExport => (page("/provisions/export?format=csv".into()), None),
        Op::ApiAuditExport => (api("/audit?format=jsonl".into()), None),
        Op::ApiProvisionsExport => (api("/provisions/export?format=jsonl".into()), None),
        Op::Metrics => (
            http.get(format!("{base}/metrics")),
            Some("headroom_http_requests_total"),
        ),
    };
    let _permit = if op.is_export() {
        Some(load.exports.acquire().await.expect("export permits"))
    } else {
        None
    };
    load.call(kind, req, 200, contains).await;
}

/// One client: the mix from its own offset, a fleet further on each time, until `stop`.
async fn client_loop(load: Arc<Load>, n: usize, pause: Duration, stop: watch::Receiver<bool>) {
    let http = client();
    let mut i = n * 7;
    while !*stop.borrow() {
        let op = MIX[i % MIX.len()];
        let fleet = &load.fleets[(i * 13 + n * 31) % load.fleets.len()];
        run_op(&load, &load.clients[n], &http, op, fleet).await;
        i += 1;
        tokio::time::sleep(pause).await;
    }
}

/// How each provision went: seconds from approval to the end, and its final state.
type ProvisionOutcome = (f64, String);

/// Once a minute: olga files a one-machine request, abe approves it, and it is followed to
/// its end. Returns each provision's outcome.
async fn provision_loop(
    load: Arc<Load>,
    until: Duration,
    stop: watch::Receiver<bool>,
) -> Vec<ProvisionOutcome> {
    let http = client();
    let base = &load.base;
    let mut outcomes = Vec::new();
    let mut next = FIRST_PROVISION_AFTER;
    let mut n = 0;
    loop {
        let wait = next.saturating_sub(load.log.elapsed());
        tokio::time::sleep(wait).await;
        if *stop.borrow() || load.log.elapsed() >= until {
            return outcomes;
        }
        next += PROVISION_EVERY;
        let fleet = &load.fleets[n * 17 % load.fleets.len()];
        n += 1;
        let filed = load
            .call(
                "provision file",
                http.post(format!("{base}/api/v1/provisions"))
                    .bearer_auth(load.token("olga"))
                    .json(
                        &json!({"fleet": fleet, "machine_config": CONFIG, "count": 1,
                                  "reason": format!("soak provision {n}")}),
                    ),
                201,
                None,
            )
            .await;
        let Some(filed) = filed.and_then(|b| serde_json::from_str::<Value>(&b).ok()) else {
            continue;
        };
        let id = filed["id"].as_i64().expect("request id");
        let approved = load
            .call(
                "provision approve",
                http.post(format!("{base}/api/v1/provisions/{id}/approve"))
                    .bearer_auth(load.token("abe"))
                    .json(&json!({"plan_hash": filed["plan_hash"]})),
                200,
                None,
            )
            .await;
        if approved.is_none() {
            continue;
        }
        let approved_at = Instant::now();
        let state = loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let got = load
                .call(
                    "provision poll",
                    http.get(format!("{base}/api/v1/provisions/{id}"))
                        .bearer_auth(load.token("abe")),
                    200,
                    None,
                )
                .await
                .and_then(|b| serde_json::from_str::<Value>(&b).ok());
            let state = got
                .as_ref()
                .and_then(|v| v["state"].as_str())
                .unwrap_or("unreadable")
                .to_owned();
            let open = ["pending_approval", "approved", "executing", "unreadable"];
            if !open.contains(&state.as_str()) || approved_at.elapsed() > PROVISION_DEADLINE {
                break state;
            }
        };
        if state != "succeeded" {
            load.log
                .note_failure(format!("provision {id} on {fleet} ended {state}"));
        }
        outcomes.push((approved_at.elapsed().as_secs_f64(), state));
    }
}

// ---------------------------------------------------------------------------------------
// Set-up

/// The simulated fleets: healthy and staying so (no tenant arrives).
async fn start_fleets() -> Vec<SimFleet> {
    let mut fleets = Vec::with_capacity(FLEETS);
    for i in 1..=FLEETS {
        let fleet = SimFleet::start(SimFleetOptions {
            name: format!("soak-{i:03}"),
            native: i % 4 != 0,
            first_tenant_after: Duration::from_secs(365 * 24 * 3600),
            tenant_every: None,
            ..SimFleetOptions::default()
        })
        .await
        .expect("simulated fleet");
        fleets.push(fleet);
    }
    fleets
}

/// Users and tokens through the binary's own commands: [`USERS`] and, for each of `clients`,
/// a viewer `vic-N` and an operator `olga-N`. Returns each user's token.
async fn make_users(
    bin: &Path,
    env: &[(String, String)],
    clients: usize,
) -> HashMap<String, String> {
    let mut tokens = HashMap::new();
    let mut users: Vec<(String, &str)> = USERS.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect();
    for n in 0..clients {
        users.push((format!("vic-{n}"), "viewer"));
        users.push((format!("olga-{n}"), "operator"));
    }
    for (name, role) in &users {
        let name = name.as_str();
        cli(
            bin,
            env,
            &["user", "add", name, "--role", role, "--password-stdin"],
            &format!("{PASSWORD}\n"),
        )
        .await;
        let token = cli(bin, env, &["token", "create", name, "--label", "soak"], "").await;
        tokens.insert(name.to_owned(), token.trim().to_owned());
    }
    tokens
}

/// The catalogue, the machine config and the fleets, through the API as admin.
async fn make_fleets(base: &str, admin: &str, sims: &[SimFleet], scrape_secs: u32) -> Vec<String> {
    let http = client();
    setup_call(
        &http,
        base,
        admin,
        "/catalogue/hetzner/refresh",
        Some(json!({})),
        200,
    )
    .await;
    let config = json!({
        "name": CONFIG, "provider": "hetzner", "location": "fsn1", "server_type": "cx22",
        "image": "debian-12", "region": "eu-central", "zone": "fsn1-dc14",
        "mesh_tags": ["tag:spare"], "ssh_keys": [4711], "labels": {"team": "infra"},
        "allocatable": {"memory_mb": 3584, "cpu_millis": 2000}, "taints": [],
        "yubaba_channel": "stable",
        "yubaba_url": "https://releases.yubaba.invalid/yubaba-1.4.2-x86_64.tar.gz",
        "yubaba_sha256": "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10"
    });
    setup_call(&http, base, admin, "/machine-configs", Some(config), 201).await;
    let mut names = Vec::with_capacity(sims.len());
    for sim in sims {
        let fleet = json!({
            "name": sim.name(), "endpoints": sim.endpoints(), "restore_machine_config": CONFIG,
            "scrape_interval_secs": scrape_secs,
            "scrape_timeout_secs": (scrape_secs - 1).min(5),
        });
        setup_call(&http, base, admin, "/fleets", Some(fleet), 201).await;
        names.push(sim.name().to_owned());
    }
    names
}

/// Gives every fleet its last `hours` of samples, every `scrape_secs` up to now: raw rows
/// (the raw retention keeps 48 h, so at the default that part is at steady state) and the
/// rollups of those hours only (the longer-kept rollups hold far less than at steady state),
/// as the product stores them, through the generator the chart benchmarks and series tests
/// use; the fleets created when it begins. Without it the chart's last hour, the cards' data
/// and the database's hot pages would all grow through the whole run from the fleets'
/// creation, and so would SQLite's page caches filling with them: bounded growth a soak
/// cannot tell from a leak.
async fn prefill_history(db: &Path, hours: i64, scrape_secs: u32) {
    const HOUR_MS: i64 = 3_600_000;
    let started = Instant::now();
    let pool = headroom::db::connect(&format!("sqlite:{}", db.display()))
        .await
        .expect("open the soak database");
    let now_ms = || {
        i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_millis(),
        )
        .expect("millis fit")
    };
    // Raw rows reach one prune interval past the raw retention at the default 48 h, as they
    // do on a server that has run for a while: its prune at start then deletes what expired
    // (an interval plus the minute or so the prefill takes), as every later prune does, and
    // the WAL goal compares like with like (with history up to the edge, the first prune
    // found nothing).
    // Rollups begin at the hour before (the generator's rule).
    let raw_span = hours * HOUR_MS + retention_interval_ms();
    let from = (now_ms() - raw_span).div_euclid(HOUR_MS) * HOUR_MS;
    let fleets: Vec<i64> = sqlx::query_scalar("SELECT id FROM fleets ORDER BY id")
        .fetch_all(&pool)
        .await
        .expect("fleet ids");
    let mut stored = 0;
    for id in &fleets {
        // The minute or so scraped before the stop is replaced by the generated history.
        for table in ["fleet_samples", "fleet_rollups"] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE fleet_id = ?"
            )))
            .bind(id)
            .execute(&pool)
            .await
            .expect("clear the first scrapes");
        }
        let seed = u64::try_from(*id).expect("positive id");
        // Up to this fleet's own now: writing all of them takes about a minute.
        let now = now_ms();
        let written = history::generate(
            &pool,
            *id,
            seed,
            from,
            now,
            i64::from(scrape_secs) * 1000,
            now - raw_span,
        )
        .await
        .expect("generate history");
        stored += written.raw;
    }
    sqlx::query("UPDATE fleets SET created_at = ?")
        .bind(from)
        .execute(&pool)
        .await
        .expect("fleets created when their history begins");
    pool.close().await;
    println!(
        "soak: {hours} h of history for {} fleets ({stored} raw samples and their rollups) in {:.1} s",
        fleets.len(),
        started.elapsed().as_secs_f64()
    );
}

/// The server's time between prunes of expired history, in milliseconds.
fn retention_interval_ms() -> i64 {
    i64::try_from(headroom::capacity::retention::EVERY.as_millis()).expect("fits")
}

/// Waits (a minute at most) until every fleet has been scraped healthy.
async fn until_all_healthy(base: &str, token: &str, fleets: &[String]) {
    let http = client();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut healthy = 0;
        for name in fleets {
            let v = setup_call(&http, base, token, &format!("/fleets/{name}"), None, 200).await;
            healthy += usize::from(v["status"] == "healthy");
        }
        if healthy == fleets.len() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {healthy} of {} fleets healthy after a minute",
            fleets.len()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

// ---------------------------------------------------------------------------------------
// Watching and judging

/// One row of the table: what the server looked like at `at`, and that interval's requests.
struct Row {
    at: Duration,
    probe: Probe,
    interval: soak_log::Summary,
}

fn print_header() {
    println!(
        "{:>6} {:>8} {:>9} {:>5} {:>7} {:>14} {:>8} {:>8} {:>8} {:>6} {:>7} {:>8}",
        "t",
        "RSS MiB",
        "file MiB",
        "fds",
        "threads",
        "workers (MiB)",
        "WAL KiB",
        "DB KiB",
        "requests",
        "errors",
        "p50 ms",
        "p99 ms"
    );
}

fn print_row(r: &Row) {
    println!(
        "{:>5}s {:>8.1} {:>9.1} {:>5} {:>7} {:>14} {:>8} {:>8} {:>8} {:>6} {:>7} {:>8}",
        r.at.as_secs(),
        r.probe.rss_kib as f64 / 1024.0,
        r.probe.rss_file_kib as f64 / 1024.0,
        r.probe.open_fds,
        r.probe.threads,
        format!(
            "{} ({:.1})",
            r.probe.children,
            r.probe.children_rss_kib as f64 / 1024.0
        ),
        r.probe.wal_bytes / 1024,
        r.probe.db_bytes / 1024,
        r.interval.requests,
        r.interval.errors,
        ms(r.interval.p50_us),
        ms(r.interval.p99_us),
    );
}

/// Prints each kind's figures over the whole run and in the second and last minutes.
fn print_kinds(entries: &[Entry], second: (u64, u64), last: (u64, u64)) {
    let mut kinds: Vec<&'static str> = entries.iter().map(|e| e.kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    println!(
        "\n{:<22} {:>8} {:>6} {:>7} {:>8} {:>8} {:>12} {:>12}",
        "kind", "requests", "errors", "p50 ms", "p99 ms", "max ms", "p99 2nd min", "p99 last min"
    );
    let within = |(from, to): (u64, u64), kind: &str| {
        summarise(
            entries
                .iter()
                .filter(|e| e.kind == kind && e.at_ms >= from && e.at_ms < to),
        )
    };
    for kind in kinds {
        let all = summarise(entries.iter().filter(|e| e.kind == kind));
        println!(
            "{:<22} {:>8} {:>6} {:>7} {:>8} {:>8} {:>12} {:>12}",
            kind,
            all.requests,
            all.errors,
            ms(all.p50_us),
            ms(all.p99_us),
            ms(all.max_us),
            ms(within(second, kind).p99_us),
            ms(within(last, kind).p99_us),
        );
    }
}

/// `value` within `fraction` of `base`, either way.
fn within(value: u64, base: u64, fraction: f64) -> bool {
    (value as f64 - base as f64).abs() <= base as f64 * fraction
}

/// The scrape figures the server reports on `/metrics`: (ticks, failures, missed ticks,
/// fleets whose newest scrape was ok).
async fn scrape_figures(base: &str) -> (u64, u64, u64, u64) {
    let text = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    let value = |line: &str| -> u64 {
        line.rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0, |v| v as u64)
    };
    let counter = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
            .map_or(0, value)
    };
    let ok_fleets = text
        .lines()
        .filter(|l| l.starts_with("headroom_fleet_scrape_success{"))
        .map(value)
        .sum();
    (
        counter("headroom_scrape_ticks_total"),
        counter("headroom_scrape_failures_total"),
        counter("headroom_scrape_missed_ticks_total"),
        ok_fleets,
    )
}

/// Lines of the server's JSON log at `level`.
fn log_lines(log: &Path, level: &str) -> Vec<String> {
    let needle = format!("\"level\":\"{level}\"");
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&needle))
        .map(str::to_owned)
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let knobs = Knobs::from_env();
    let dir = tempfile::Builder::new()
        .prefix("headroom-soak-")
        .tempdir()
        .expect("temp dir");
    // A private copy: a rebuild of the shared target during the run must not swap the binary
    // (or the render workers it starts from itself) under the soak.
    let bin = dir.path().join("headroom");
    let built = std::env::var_os("HEADROOM_SOAK_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_headroom")),
        PathBuf::from,
    );
    std::fs::copy(&built, &bin).expect("copy the headroom binary");

    let fake = fake_hetzner::FakeHetzner::start().await;
    let sims = start_fleets().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("loopback port")
        .local_addr()
        .expect("address")
        .port();
    let env = server_env(dir.path(), port, &fake);
    let tokens = make_users(&bin, &env, knobs.clients).await;
    let mut server = Server::start(&bin, dir.path(), env).await;
    let base = server.base.clone();
    println!(
        "soak: headroom serve (pid {}) on {base}, database and log in {}",
        server.pid,
        dir.path().display()
    );
    let fleets = make_fleets(&base, &tokens["admin"], &sims, knobs.scrape_secs).await;
    until_all_healthy(&base, &tokens["admin"], &fleets).await;
    if knobs.history_hours > 0 {
        // The history is written with the server stopped, so nothing it scrapes meanwhile
        // lands in the buckets being written.
        let env = server.env.clone();
        let stopped = server.stop().await;
        assert!(
            stopped.is_some_and(|s| s.success()),
            "headroom serve did not stop cleanly before the history was written: {stopped:?}"
        );
        prefill_history(&server.db, knobs.history_hours, knobs.scrape_secs).await;
        server = Server::start(&bin, dir.path(), env).await;
        println!("soak: headroom serve restarted (pid {})", server.pid);
        until_all_healthy(&base, &tokens["admin"], &fleets).await;
    }
    let http = client();
    let template_body = setup_call(
        &http,
        &base,
        &tokens["olga"],
        "/templates/yubaba-node",
        None,
        200,
    )
    .await["body"]
        .as_str()
        .expect("template body")
        .to_owned();
    let mut identities = Vec::with_capacity(knobs.clients);
    for n in 0..knobs.clients {
        let (viewer, operator) = (format!("vic-{n}"), format!("olga-{n}"));
        identities.push(Identity {
            viewer: login(&http, &base, &viewer).await,
            viewer_token: tokens[&viewer].clone(),
            operator: login(&http, &base, &operator).await,
            operator_token: tokens[&operator].clone(),
        });
    }
    println!(
        "{FLEETS} fleets scraped every {} s and healthy; {} clients pausing {} ms, one \
         provision a minute, {} s",
        knobs.scrape_secs,
        knobs.clients,
        knobs.pause.as_millis(),
        knobs.seconds
    );

    let load = Arc::new(Load {
        base: base.clone(),
        tokens,
        clients: identities,
        exports: tokio::sync::Semaphore::new(EXPORTS_AT_ONCE),
        fleets,
        template_body,
        log: RequestLog::new(),
    });
    let run_for = Duration::from_secs(knobs.seconds);
    let (stop, stopped) = watch::channel(false);
    let clients: Vec<_> = (0..knobs.clients)
        .map(|n| tokio::spawn(client_loop(load.clone(), n, knobs.pause, stopped.clone())))
        .collect();
    let provisions = tokio::spawn(provision_loop(load.clone(), run_for, stopped.clone()));

    print_header();
    let mut rows = Vec::new();
    let mut seen = 0;
    let mut server_died = None;
    let mut tick = SAMPLE_EVERY;
    while tick <= run_for {
        tokio::time::sleep(tick.saturating_sub(load.log.elapsed())).await;
        if let Some(status) = server.exited() {
            load.log
                .note_failure(format!("the server exited: {status}"));
            server_died = Some(status);
            break;
        }
        let (entries, next) = load.log.since(seen);
        seen = next;
        let Some(probe) = server.probe() else {
            break;
        };
        let row = Row {
            at: tick,
            probe,
            interval: summarise(&entries),
        };
        print_row(&row);
        rows.push(row);
        tick += SAMPLE_EVERY;
    }
    let _ = stop.send(true);
    for c in clients {
        c.await.expect("client");
    }
    let outcomes = provisions.await.expect("provisioner");
    let (entries, _) = load.log.since(0);
    let (ticks, scrape_failures, missed, ok_fleets) = if server_died.is_none() {
        scrape_figures(&base).await
    } else {
        (0, 0, 0, 0)
    };
    let stopped_with = server.stop().await;
    let verify = tokio::process::Command::new(&server.bin)
        .args(["audit", "verify"])
        .env_clear()
        .envs(server.env.iter().map(|(k, v)| (k, v)))
        .output()
        .await
        .expect("audit verify");
    let errors_logged = log_lines(&server.log, "ERROR");
    let warnings_logged = log_lines(&server.log, "WARN");
    drop(sims);
    drop(fake);

    // The report.
    println!("\nsoak over {} s ({} samples):", knobs.seconds, rows.len());
    print_header();
    for r in &rows {
        print_row(r);
    }
    let end_ms = rows.last().map_or(0, |r| r.at.as_millis() as u64);
    let second = (60_000, 120_000);
    let last = (end_ms.saturating_sub(60_000), end_ms + 1);
    print_kinds(&entries, second, last);
    let whole = summarise(&entries);
    let succeeded = outcomes.iter().filter(|(_, s)| s == "succeeded").count();
    let times: Vec<String> = outcomes.iter().map(|(t, _)| format!("{t:.1}")).collect();
    println!(
        "\nrequests: {}, errors {}; provisions: {succeeded} of {} succeeded (approval → done, s: {})",
        whole.requests,
        whole.errors,
        outcomes.len(),
        times.join(", ")
    );
    println!(
        "scrapes: {ticks} ticks, {scrape_failures} failed, {missed} missed; {ok_fleets} of \
         {FLEETS} fleets' newest scrape ok"
    );
    println!(
        "server log: {} ERROR, {} WARN lines; stopped: {:?}; audit verify: {}",
        errors_logged.len(),
        warnings_logged.len(),
        stopped_with,
        String::from_utf8_lossy(&verify.stdout).trim()
    );
    for line in errors_logged.iter().chain(&warnings_logged).take(10) {
        println!("  log: {}", line.chars().take(400).collect::<String>());
    }
    for f in load.log.failures() {
        println!("  failure: {f}");
    }

    let mut goals = goals::Goals::default();
    let failed_provisions = outcomes.len() - succeeded;
    let errors = whole.errors + failed_provisions + scrape_failures as usize + errors_logged.len();
    goals.check(
        &format!(
            "0 errors ({} failed requests, {failed_provisions} failed provisions, \
             {scrape_failures} failed scrapes, {} ERROR log lines{})",
            whole.errors,
            errors_logged.len(),
            if server_died.is_some() {
                ", the server died"
            } else {
                ""
            }
        ),
        errors == 0 && server_died.is_none(),
    );
    goals.check(
        &format!("every fleet scraped ok at the end ({ok_fleets} of {FLEETS})"),
        ok_fleets == FLEETS as u64,
    );
    let after_first_minute: Vec<&Row> = rows
        .iter()
        .filter(|r| r.at >= Duration::from_secs(60))
        .collect();
    if let Some(base_row) = after_first_minute.first() {
        let rss = |r: &Row| r.probe.rss_kib;
        let fds = |r: &Row| r.probe.open_fds;
        for (what, read, unit) in [
            ("RSS", &rss as &dyn Fn(&Row) -> u64, "KiB"),
            ("open files", &fds, ""),
        ] {
            let base_value = read(base_row);
            let (lo, hi) = after_first_minute
                .iter()
                .map(|r| read(r))
                .fold((u64::MAX, 0), |(lo, hi), v| (lo.min(v), hi.max(v)));
            goals.check(
                &format!(
                    "{what} within 10 % of its value at 1 min ({base_value} {unit}; \
                     {lo}–{hi} after)"
                ),
                within(lo, base_value, 0.10) && within(hi, base_value, 0.10),
            );
        }
        let half = run_for / 2;
        let largest = |rows: &mut dyn Iterator<Item = &Row>| {
            rows.map(|r| r.probe.wal_bytes).max().unwrap_or(0)
        };
        let first_half = largest(&mut rows.iter().filter(|r| r.at <= half));
        let second_half = largest(&mut rows.iter().filter(|r| r.at > half));
        goals.check(
            &format!(
                "WAL bounded: largest in the second half ≤ 1.1 × largest in the first \
                 ({} KiB vs {} KiB)",
                second_half / 1024,
                first_half / 1024
            ),
            second_half as f64 <= first_half as f64 * 1.1,
        );
        let p99 = |(from, to): (u64, u64)| {
            summarise(entries.iter().filter(|e| e.at_ms >= from && e.at_ms < to)).p99_us
        };
        let (p99_second, p99_last) = (p99(second), p99(last));
        goals.check(
            &format!(
                "p99 of the last minute ≤ 1.5 × the second minute's ({} ms vs {} ms)",
                ms(p99_last),
                ms(p99_second)
            ),
            p99_last as f64 <= p99_second as f64 * 1.5,
        );
    } else {
        goals.check("the run lasted past its first minute", false);
    }
    goals.check(
        "the audit chain verifies after the run",
        verify.status.success(),
    );
    // A missed goal exits before `dir` is dropped: the database and the server's log stay for
    // a look; the binary's copy does not.
    let _ = std::fs::remove_file(&bin);
    println!(
        "database and server log: {} (kept only when a goal is missed)",
        dir.path().display()
    );
    goals.exit_if_missed();
}
