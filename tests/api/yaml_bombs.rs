//! Hostile YAML cannot crash or stall validation, which parses every payload in the server
//! process: 20,000 levels of nesting, a billion-laughs alias bomb and 128 KiB of flow
//! collections each get a blocking finding while `/healthz` keeps answering, and a stored
//! hostile template used by a fleet's restore config does not stop a server from starting.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom::auth::Caller;
use headroom::context::Ctx;
use headroom::domain::Role;
use serde_json::{json, Value};

use crate::fake_hetzner::FakeHetzner;
use crate::helpers::{texts, Session, TestApp};
use crate::runner::{fleet, hetzner_config};

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

/// What the depth bound says (cloud_init::validate::MAX_YAML_DEPTH levels).
const TOO_DEEP: &str = "nested deeper than 64 levels";

/// Longest a hostile render may take to be answered: far above a normal one, far below a stall.
const ANSWER_WITHIN: Duration = Duration::from_secs(15);

/// `levels` copies of `open`, then `middle`, then `levels` copies of `close`, produced by two
/// nested `range` loops (each capped at 10,000 items), as an operator would write it.
fn nested(levels: usize, open: &str, middle: &str, close: &str) -> String {
    assert_eq!(levels % 100, 0);
    let outer = levels / 100;
    let repeat = |piece: &str| {
        if piece.is_empty() {
            String::new()
        } else {
            format!(
                "{{% for i in range(end={outer}) %}}{{% for j in range(end=100) %}}{piece}{{% endfor %}}{{% endfor %}}"
            )
        }
    };
    format!(
        "#cloud-config\nx:\n  {}{middle}{}\n",
        repeat(open),
        repeat(close)
    )
}

/// 20,000 nested block sequences (`- - - … 1`): the template that aborted the server.
fn deep_block() -> String {
    "#cloud-config\nx:\n{% for i in range(end=200) %}{% for j in range(end=100) %}- {% endfor %}{% endfor %}1\n"
        .to_owned()
}

/// A billion laughs: ten levels of ten aliases to the level below.
fn alias_bomb() -> String {
    let mut bomb = "#cloud-config\nl0: &l0 \"lol\"\n".to_owned();
    for level in 1..=9 {
        let refs = vec![format!("*l{}", level - 1); 10].join(", ");
        bomb.push_str(&format!("l{level}: &l{level} [{refs}]\n"));
    }
    bomb
}

/// A flat flow sequence of `[1,1,1,…]` filling most of the 128 KiB render cap.
fn wide_flow() -> String {
    "#cloud-config\nx: [{% for i in range(end=6) %}{% for j in range(end=10000) %}1,{% endfor %}{% endfor %}1]\n"
        .to_owned()
}

/// Every hostile template with what its answer must say and on which line.
fn hostile() -> Vec<(&'static str, String, &'static str, u64)> {
    vec![
        ("deep-block", deep_block(), TOO_DEEP, 3),
        ("deep-flow-seq", nested(20_000, "[", "1", "]"), TOO_DEEP, 3),
        (
            "deep-flow-map",
            nested(20_000, "{a: ", "1", "}"),
            TOO_DEEP,
            3,
        ),
        ("alias-bomb", alias_bomb(), "anchors", 2),
    ]
}

/// Polls `/healthz` until stopped; counts answers that were not 200.
struct HealthWatch {
    stop: Arc<AtomicBool>,
    polls: Arc<AtomicUsize>,
    failures: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl HealthWatch {
    fn start(app: &TestApp) -> Self {
        let (stop, polls, failures) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
        );
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let url = app.url("/healthz");
        let task = tokio::spawn({
            let (stop, polls, failures) = (stop.clone(), polls.clone(), failures.clone());
            async move {
                while !stop.load(Ordering::SeqCst) {
                    let ok = client
                        .get(&url)
                        .send()
                        .await
                        .is_ok_and(|r| r.status() == 200);
                    polls.fetch_add(1, Ordering::SeqCst);
                    if !ok {
                        failures.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
        Self {
            stop,
            polls,
            failures,
            task,
        }
    }

    /// Stops polling; every poll must have been answered 200.
    async fn assert_answered_throughout(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap();
        let polls = self.polls.load(Ordering::SeqCst);
        assert!(polls >= 2, "healthz was polled only {polls} times");
        assert_eq!(
            self.failures.load(Ordering::SeqCst),
            0,
            "healthz failed during hostile renders ({polls} polls)"
        );
    }
}

async fn save_template(app: &TestApp, token: &str, name: &str, body: &str) {
    let res = app
        .client
        .post(app.url("/api/v1/templates"))
        .bearer_auth(token)
        .json(&json!({"name": name, "body": body}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{name}: {}", res.text().await.unwrap());
}

async fn render_api(app: &TestApp, token: &str, template: &str) -> Value {
    let res = app
        .client
        .post(app.url("/api/v1/render"))
        .bearer_auth(token)
        .json(&json!({"machine_config": "spare-fsn1", "template": template}))
        .send()
        .await
        .expect("the server answers the render");
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

async fn preview(app: &TestApp, op: &Session, body: &str) -> Vec<String> {
    let res = app
        .htmx_post("/preview", op, &[("config", "spare-fsn1"), ("body", body)])
        .await;
    assert_eq!(res.status(), 200);
    texts(&res.text().await.unwrap(), "#findings li")
}

/// The render's blocking finding saying `says`, at `line`.
fn assert_blocked(name: &str, v: &Value, says: &str, line: u64) {
    assert_eq!(v["ok"], false, "{name}: {v}");
    let findings = v["findings"].as_array().unwrap();
    assert!(
        findings.iter().any(|f| f["severity"] == "error"
            && f["message"].as_str().unwrap().contains(says)
            && f["line"] == line),
        "{name}: {findings:?}"
    );
}

#[tokio::test]
async fn hostile_yaml_is_answered_with_a_finding_while_healthz_keeps_answering() {
    let app = TestApp::spawn_with_config().await;
    app.create_user("op", Role::Operator).await;
    let token = app.token_for("op").await;
    let op = app.quick_session("op").await;
    let watch = HealthWatch::start(&app);

    for (name, body, says, line) in hostile() {
        // The save check parses the template, never its output: it is stored.
        save_template(&app, &token, name, &body).await;
        let started = Instant::now();
        let v = render_api(&app, &token, name).await;
        assert!(started.elapsed() < ANSWER_WITHIN, "{name}: render stalled");
        assert_blocked(name, &v, says, line);

        let started = Instant::now();
        let findings = preview(&app, &op, &body).await;
        assert!(started.elapsed() < ANSWER_WITHIN, "{name}: preview stalled");
        assert!(
            findings
                .iter()
                .any(|f| f.contains(says) && f.contains(&line.to_string())),
            "{name}: {findings:?}"
        );
    }
    watch.assert_answered_throughout().await;
}

#[tokio::test]
async fn a_128_kib_flow_sequence_is_validated_in_time_while_healthz_keeps_answering() {
    let app = TestApp::spawn_with_config().await;
    app.create_user("op", Role::Operator).await;
    let token = app.token_for("op").await;
    let op = app.quick_session("op").await;
    let watch = HealthWatch::start(&app);

    save_template(&app, &token, "wide-flow", &wide_flow()).await;
    let started = Instant::now();
    let v = render_api(&app, &token, "wide-flow").await;
    assert!(started.elapsed() < ANSWER_WITHIN, "render stalled");
    assert!(
        v["size_bytes"].as_u64().unwrap() > 120_000,
        "{}",
        v["size_bytes"]
    );
    // Too big for Hetzner, and not a cloud-config, but parsed and judged: no limit finding.
    let findings = v["findings"].as_array().unwrap();
    let checks: Vec<&str> = findings
        .iter()
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    assert!(
        checks.iter().any(|m| m.contains("user_data cap")),
        "{checks:?}"
    );
    assert!(
        checks
            .iter()
            .any(|m| m.contains("`x` is not a cloud-config")),
        "the document was parsed: {checks:?}"
    );
    assert!(
        !checks.iter().any(|m| m.contains("could not be validated")),
        "{checks:?}"
    );
    let started = Instant::now();
    let shown = preview(&app, &op, &wide_flow()).await;
    assert!(started.elapsed() < ANSWER_WITHIN, "preview stalled");
    assert!(
        shown.iter().any(|f| f.contains("user_data cap")),
        "{shown:?}"
    );
    watch.assert_answered_throughout().await;
}

/// A deficit of fleet `prod` stored open and without its proposal, as a crash between the
/// deficit's commit and its filing leaves it: the next start files it (rendering the restore
/// config). Returns the deficit's id.
async fn unfiled_deficit(ctx: &Ctx) -> i64 {
    let mut conn = ctx.pool.acquire().await.unwrap();
    let fleet_id: i64 = sqlx::query_scalar("SELECT id FROM fleets WHERE name = 'prod'")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    let now = ctx.now();
    let deficit_id: i64 = sqlx::query_scalar(
        "INSERT INTO fleet_deficits (fleet_id, started_at, detected_at, spare, required, evidence)
         VALUES ($1, $2, $3, 1, 3, '{\"status\":{},\"samples\":[]}') RETURNING id",
    )
    .bind(fleet_id)
    .bind(now - 15_000)
    .bind(now)
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO fleet_status (fleet_id, sampled_at, ok, source, spare, required, ok_at,
                                   latency_ms, below_streak, open_deficit_id)
         VALUES ($1, $2, 1, 'native', 1, 3, $3, 12, 3, $4)",
    )
    .bind(fleet_id)
    .bind(now)
    .bind(now)
    .bind(deficit_id)
    .execute(&mut *conn)
    .await
    .unwrap();
    deficit_id
}

/// A database as a person would have left it: the hostile template saved through the save
/// check, the restore config `spare-fsn1` using it, fleet `prod` restoring that config, and
/// an open deficit of `prod` still to be filed.
async fn prepare(db: &str, fake: &FakeHetzner) -> (Ctx, i64) {
    let ctx = crate::crash::offline_ctx(db, fake).await;
    headroom::machine_setup::templates::create(&ctx, &Caller::system(), "deep", &deep_block())
        .await
        .expect("the save check only parses the template");
    let config = headroom::domain::machine::MachineInput {
        template: "deep".into(),
        ..hetzner_config()
    };
    headroom::machine_setup::configs::create(&ctx, &Caller::system(), &config)
        .await
        .expect("config");
    fleet(&ctx, "prod", &[]).await;
    let deficit = unfiled_deficit(&ctx).await;
    (ctx, deficit)
}

/// `headroom serve` on a free port with the scraper on (so start-up files open deficits),
/// against the loopback fake Hetzner.
fn serve(db: &str, fake: &FakeHetzner, log: &Path) -> Child {
    let out = std::fs::File::create(log).unwrap();
    Command::new(BIN)
        .env("HEADROOM_HETZNER_API_URL", fake.uri())
        .args(["--database-url", db, "--log-format", "json", "serve"])
        .args(["--bind", "127.0.0.1:0"])
        .env("HEADROOM_WORKERS", "1")
        .env("HEADROOM_SCRAPE_ENABLED", "true")
        .env("HETZNER_API_TOKEN", fake.token())
        .env_remove("HETZNER_API_TOKEN_FILE")
        .env("RUST_LOG", "info")
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap()
}

/// The port the server announced, or a panic quoting its log should it die or stay silent.
async fn announced_port(child: &mut Child, log: &Path) -> u16 {
    for _ in 0..600 {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(port) = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|v| v["port"].as_u64())
        {
            return u16::try_from(port).unwrap();
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the server died while starting ({status}):\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "the server never announced its port: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// Kills the child when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_stored_hostile_restore_template_does_not_stop_the_server_starting() {
    let fake = FakeHetzner::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("headroom.db").display());
    let (ctx, deficit) = prepare(&db, &fake).await;

    let log = dir.path().join("serve.log");
    let mut server = Killed(serve(&db, &fake, &log));
    let port = announced_port(&mut server.0, &log).await;

    // Start-up filed the deficit's proposal, rendering the hostile restore config: the
    // deficit notes the finding instead of the server dying.
    let mut note = String::new();
    for _ in 0..400 {
        note = sqlx::query_scalar("SELECT note FROM fleet_deficits WHERE id = $1")
            .bind(deficit)
            .fetch_one(&ctx.pool)
            .await
            .unwrap();
        if !note.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(note.starts_with("no restore was filed"), "{note:?}");
    assert!(note.contains(TOO_DEEP), "{note:?}");

    let health = reqwest::get(format!("http://127.0.0.1:{port}/healthz"))
        .await
        .expect("the server answers after filing");
    assert_eq!(health.status(), 200);
    assert!(
        server.0.try_wait().unwrap().is_none(),
        "the server is still running"
    );
}
