//! The dashboard under load against a static file, same concurrency: the real console on
//! loopback (port 0) over a SQLite file holding 20 fleets and 90 days of history, one
//! signed-in admin session, then `HEADROOM_BENCH_CONNECTIONS` (default 32) keep-alive
//! connections for `HEADROOM_BENCH_SECONDS` (default 10) each against `/` and
//! `/static/app.css`. Prints requests per second and p50/p99 latency for each and their
//! ratio (goal: the dashboard at least half the static file's rate).
//!
//! The history has the shape retention leaves (raw samples every 15 s for the last 48 h,
//! one a minute back to 14 days, one an hour back to 90 days), each written through the real
//! `db::fleet_samples::insert` with its rollups, and the newest through the real `record`,
//! so fleet status and deficits are what the scraper would have left.
//!
//! `cargo bench --bench dashboard_load`

#[path = "support/goals.rs"]
mod goals;

use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom::auth::secret_token;
use headroom::domain::capacity::{Member, Observation, Sample, Source};
use headroom::domain::fleet::FleetInput;
use headroom::domain::{Caller, Role, SystemClock, UnixMillis, Username};

const FLEETS: usize = 20;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A sample whose numbers wander like a real fleet's (a short dip now and then).
fn sample(at: UnixMillis, fleet: usize) -> Sample {
    let phase = (at / (15 * 1000)) as u64 + fleet as u64 * 7919;
    let required = 3;
    let spare = if phase % 997 < 20 {
        1
    } else {
        3 + (phase % 3) as u32
    };
    Sample {
        at,
        latency_ms: 5 + phase % 40,
        outcome: Ok(Observation {
            absorption: None,
            source: Source::Native,
            spare,
            required,
            leader_id: Some(1),
            leader_url: Some("http://127.0.0.1:9".into()),
            term: Some(7),
            members: (1..=3)
                .map(|id| Member::listed(id, format!("127.0.0.1:{}", 7440 + id), true))
                .collect(),
            evidence: serde_json::json!({"headroom": {"spare": spare, "required": required}}),
        }),
    }
}

/// Sample times from 90 days ago to just before `now`, thinning with age like retention.
fn history_times(now: UnixMillis) -> Vec<UnixMillis> {
    let mut at = now - 90 * DAY;
    let mut out = Vec::new();
    while at < now - 15_000 {
        out.push(at);
        let age = now - at;
        at += if age > 14 * DAY {
            HOUR
        } else if age > 2 * DAY {
            MINUTE
        } else {
            15_000
        };
    }
    out
}

async fn fill_history(ctx: &headroom::context::Ctx, names: &[String]) -> usize {
    let now = ctx.now();
    let times = history_times(now);
    let mut written = 0;
    for (i, name) in names.iter().enumerate() {
        let mut conn = ctx.pool.acquire().await.expect("connection");
        let fleet_id = headroom::db::fleet_samples::fleet_ref(&mut conn, name)
            .await
            .expect("fleet ref")
            .expect("fleet exists")
            .id;
        drop(conn);
        for chunk in times.chunks(5_000) {
            let mut tx = headroom::db::begin_write(&ctx.pool).await.expect("tx");
            for at in chunk {
                headroom::db::fleet_samples::insert(&mut tx, fleet_id, &sample(*at, i))
                    .await
                    .expect("insert sample");
            }
            tx.commit().await.expect("commit");
            written += chunk.len();
        }
        // The newest through the one writer of fleet status, as a scrape would.
        headroom::capacity::record::record(ctx, name, &sample(now, i))
            .await
            .expect("record");
        written += 1;
    }
    written
}

/// Signs in an admin the way the login form leaves things: a session row behind a cookie.
async fn admin_cookie(ctx: &headroom::context::Ctx) -> String {
    let mut conn = ctx.pool.acquire().await.expect("connection");
    let user = headroom::db::users::insert(
        &mut conn,
        &Username::parse("bench-admin").expect("name"),
        Role::Admin,
        "not-a-password-hash",
        ctx.now(),
    )
    .await
    .expect("insert user")
    .expect("new user");
    let token = secret_token::generate("hs_");
    headroom::db::sessions::insert(&mut conn, &secret_token::digest(&token), user.id, ctx.now())
        .await
        .expect("insert session");
    format!("{}={token}", headroom::auth::sessions::COOKIE)
}

struct Run {
    requests: usize,
    rps: f64,
    p50: Duration,
    p99: Duration,
}

/// `connections` clients, each with its own keep-alive connection, GET `url` until the
/// deadline; every answer must be 200.
async fn load(url: &str, cookie: &str, connections: usize, seconds: u64) -> Run {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client");
        let url = url.to_owned();
        let cookie = cookie.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                let res = client
                    .get(&url)
                    .header("Cookie", &cookie)
                    .send()
                    .await
                    .expect("request");
                let status = res.status();
                let _ = res.bytes().await.expect("body");
                assert_eq!(status, 200, "GET {url}");
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("load task"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort();
    let pick = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    Run {
        requests: all.len(),
        rps: all.len() as f64 / elapsed,
        p50: pick(0.50),
        p99: pick(0.99),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let connections: usize = env_or("HEADROOM_BENCH_CONNECTIONS", 32);
    let seconds: u64 = env_or("HEADROOM_BENCH_SECONDS", 10);
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = headroom::config::Settings {
        bind: "127.0.0.1:0".into(),
        database_url: format!("sqlite:{}", dir.path().join("bench.db").display()),
        render_worker: Some(env!("CARGO_BIN_EXE_headroom").into()),
        simulated_provider: true,
        ..headroom::config::Settings::default()
    };
    let pool = headroom::db::connect(&settings.database_url)
        .await
        .expect("database");
    let app = headroom::startup::Application::bind(settings, pool, Arc::new(SystemClock))
        .await
        .expect("build");
    let port = app.port();
    let state = app.state().clone();
    let ctx = state.ctx.clone();
    headroom::sim::demo::seed_config(&state)
        .await
        .expect("machine config");
    let names: Vec<String> = (1..=FLEETS).map(|i| format!("fleet-{i:02}")).collect();
    for name in &names {
        let input = FleetInput {
            name: name.clone(),
            // The discard port on loopback: any scrape of it fails fast, nothing else is hit.
            endpoints: vec!["http://127.0.0.1:9".into()],
            restore_machine_config: "spare-fsn1".into(),
            ..FleetInput::default()
        };
        headroom::fleets::create(&ctx, &Caller::system(), &input)
            .await
            .expect("create fleet");
    }
    let t = Instant::now();
    let written = fill_history(&ctx, &names).await;
    println!(
        "history: {FLEETS} fleets, 90 days, {written} samples (with rollups) in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let cookie = admin_cookie(&ctx).await;
    tokio::spawn(app.run_until_stopped());

    let base = format!("http://127.0.0.1:{port}");
    // One warm-up request each (templates, caches, connections).
    let _ = load(&format!("{base}/"), &cookie, 1, 1).await;
    let dash = load(&format!("{base}/"), &cookie, connections, seconds).await;
    let stat = load(
        &format!("{base}/static/app.css"),
        &cookie,
        connections,
        seconds,
    )
    .await;
    println!("{connections} keep-alive connections, {seconds} s each:");
    for (what, r) in [("dashboard /", &dash), ("static /static/app.css", &stat)] {
        println!(
            "  {what:<24} {:>8.0} req/s  p50 {:>9}  p99 {:>9}  ({} requests)",
            r.rps,
            ms(r.p50),
            ms(r.p99),
            r.requests
        );
    }
    let ratio = dash.rps / stat.rps;
    println!("  dashboard / static = {ratio:.2}");
    let mut goals = goals::Goals::default();
    goals.check(
        &format!("dashboard at least 0.50× the static file's rate ({ratio:.2}×)"),
        ratio >= 0.5,
    );
    goals.exit_if_missed();
}
